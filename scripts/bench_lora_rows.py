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

import argparse
import statistics

import torch
from bench_prompt_sharing import NODES, TASKS, G, experiment_groups, one_pass

from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings
from node.policy.model import load_base
from node.policy.precision import resolve_precision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed passes of each way")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    pool, names = AdapterPool(load_base("smollm2-135m")), [f"n{i}" for i in range(NODES)]
    for i, name in enumerate(names):
        pool.add(name, LoraSettings(), OptimizerSettings(lr=5e-4), seed=i)
        with torch.no_grad():  # a trained adapter's B is not zero: each adapter differs
            for key, param in pool.adapter_parameters(name).items():
                if "lora_B" in key:
                    param.normal_(0, 0.01)
    groups = experiment_groups(pool, names)
    adapters = [n for n in names for _ in range(TASKS)]
    print(f"{len(groups)} groups x G = {G} through {NODES} adapters, {args.threads} threads")

    for precision in ("float32", "auto"):
        dtype = resolve_precision(precision, torch.device("cpu"))
        if precision == "auto" and dtype is None:
            print("auto: float32 on this machine (no faster bf16), not measured again")
            continue
        label = "bf16 autocast" if dtype is not None else "float32"
        seconds: dict[bool, list[float]] = {True: [], False: []}
        results: dict[bool, tuple[torch.Tensor, torch.Tensor]] = {}
        for repeat in range(args.repeats + 1):
            for stacked in (False, True):
                spent, *results[stacked] = one_pass(pool, groups, adapters, dtype, stacked=stacked)
                if repeat:  # the first of each is a warm-up
                    seconds[stacked].append(spent)
        runs, stacked_s = statistics.median(seconds[False]), statistics.median(seconds[True])
        (logp_runs, grad_runs), (logp_stacked, grad_stacked) = results[False], results[True]
        logp_gap = float((logp_stacked - logp_runs).abs().max())
        grad_gap = float((grad_stacked - grad_runs).norm() / grad_runs.norm())
        print(f"{label}: run by run {runs:.3f} s, stacked {stacked_s:.3f} s (median of "
              f"{args.repeats}): {runs / stacked_s:.2f}x; log-probs differ by at most "
              f"{logp_gap:.1e}, gradients by {grad_gap:.1e} of their norm")  # fmt: skip


if __name__ == "__main__":
    main()
