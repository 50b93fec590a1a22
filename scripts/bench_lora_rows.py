#!/usr/bin/env python
"""Several adapters in one pass with gradients: their products stacked, against run by run.

``node.policy.adapters.RowAdapters`` routes each batch row through its node's LoRA adapter.
Run by run (the baseline, ``AdapterPool.rows(..., stacked=False)``), each LoRA layer slices each
run of one adapter's rows, runs its two small products and adds them in place: a handful of
operations per run, layer and pass, and as many again in the backward. Stacked (the default in
passes that record gradients), each layer runs two products for all rows: the rows times every
adapter's A, each row's columns of other adapters zeroed, times the B's side by side.

The workload is ``scripts/bench_prompt_sharing.py``'s: one batched update's pass of the
experiment, 4 SmolLM2 adapters x 4 tasks, G = 4 completions of up to 16 tokens, all 16 groups
in one pass (``shared_prompt_hidden``, the chosen tokens' log-probs, the backward), in float32
and, where the update would pick it, bf16 autocast. The two ways alternate, ``--repeats``
times each after a warm-up; the medians, their ratio and the largest differences of the
log-probs and of the adapters' gradients between the ways are printed.

Usage: .venv/bin/python scripts/bench_lora_rows.py [--repeats 7] [--threads 2]
"""

from __future__ import annotations

from bench_prompt_sharing import (
    NODES,
    TASKS,
    G,
    alternated,
    bench_arguments,
    experiment_groups,
    experiment_pool,
    precisions,
)


def main() -> None:
    args = bench_arguments(__doc__, "passes of each way")

    pool, names = experiment_pool(trained=True)
    groups = experiment_groups(pool, names)
    adapters = [n for n in names for _ in range(TASKS)]
    print(f"{len(groups)} groups x G = {G} through {NODES} adapters, {args.threads} threads")

    ways = {"runs": {"stacked": False}, "stacked": {"stacked": True}}
    for label, dtype in precisions():
        result = alternated(pool, groups, adapters, dtype, args.repeats, ways)
        (runs, logp_runs, grad_runs), (stacked, logp_stacked, grad_stacked) = (
            result["runs"],
            result["stacked"],
        )
        logp_gap = float((logp_stacked - logp_runs).abs().max())
        grad_gap = float((grad_stacked - grad_runs).norm() / grad_runs.norm())
        print(f"{label}: run by run {runs:.3f} s, stacked {stacked:.3f} s (median of "
              f"{args.repeats}): {runs / stacked:.2f}x; log-probs differ by at most "
              f"{logp_gap:.1e}, gradients by {grad_gap:.1e} of their norm")  # fmt: skip


if __name__ == "__main__":
    main()
