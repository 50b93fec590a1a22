#!/usr/bin/env python
"""What the peers' log-prob gap rule costs a GRPO update: the update with it, against without.

The rule (``peer_logprob_gap``, on by default) holds each peer's group to the node's own
completions' mean log-prob under the policy before the step. Judged in a no-grad pass of its
own, it costs a forward of every group; judged on the update's own passes, nothing.

Two workloads, on the shipped SmolLM2 with LoRA adapters, groups sampled by the adapters
(``generate_together``) with their log-probs, rewards with signal, 2 threads:

- ``experiment``: the joint update of ``swarm experiment`` at 2/2, 4 adapters trained together
  (``train_together``), each on 2 own groups and 2 groups sampled by the next adapter (peers'),
  G = 4, up to 16 new tokens: one pass;
- ``node``: one node's update at the node's defaults, 4 own groups and 4 peers', G = 8, up to
  16 new tokens, 16 completions a pass: four passes.

Each update runs the node's ``[training]`` defaults (``precision = "auto"``, importance
weights), with optimizers at learning rate 0 so every repeat trains the same adapters. The
rule's gap is wide enough that no group is dropped, so both sides train on the same tokens.
With and without alternate, ``--repeats`` times each after a warm-up; the medians and their
ratio are printed.

Usage: .venv/bin/python scripts/bench_gap_rule.py [--repeats 7] [--threads 2]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from bench_prompt_sharing import NEW_TOKENS, bench_arguments, experiment_pool, experiment_samples

from node import defaults
from node.learning_data import ScoredGroup
from node.policy.adapters import AdapterPool
from node.policy.grpo import GRPOConfig, TrainShare, train_together

REWARDS = {4: [1.0, 0.0, 0.5, 0.0], 8: [1.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.0, 0.5]}


def sampled_groups(
    pool: AdapterPool, names: list[str], tasks: int, size: int
) -> dict[str, list[ScoredGroup]]:
    """Each adapter's ``tasks`` groups of ``size`` completions, sampled by it, as its own."""
    prompts, samples = experiment_samples(pool, names, tasks, size)
    return {
        name: [ScoredGroup(list(p), list(c), REWARDS[size]) for p, c in zip(ps, cs)]
        for name, ps, cs in zip(names, prompts, samples)
    }  # fmt: skip


def as_peers(groups: list[ScoredGroup]) -> list[ScoredGroup]:
    return [ScoredGroup(g.prompt, g.completions, g.rewards, origin="peer") for g in groups]


def config(gap: float | None, micro_batch_size: int) -> GRPOConfig:
    return GRPOConfig(
        max_completion_tokens=NEW_TOKENS,
        micro_batch_size=micro_batch_size,
        peer_logprob_gap=gap,
        peer_importance=defaults.PEER_IMPORTANCE,
        peers_only_steps=defaults.PEERS_ONLY_STEPS,
    )


def experiment(pool: AdapterPool) -> Callable[[float | None], None]:
    """The 2/2 joint update of the pool's adapters (four): one pass."""
    names = pool.names
    sampled = sampled_groups(pool, names, tasks=2, size=4)
    following = names[1:] + names[:1]
    groups = {name: sampled[name] + as_peers(sampled[peer]) for name, peer in zip(names, following)}

    def update(gap: float | None) -> None:
        shares = [
            TrainShare(groups[n], torch.optim.SGD(pool.adapter_parameters(n).values(), lr=0.0), n)
            for n in names
        ]
        with pool.rows(names, trainable=True) as routing:
            train_together(pool.model, pool.base.tokenizer, config(gap, 16), shares,
                           routing=routing)  # fmt: skip

    return update


def node(pool: AdapterPool) -> Callable[[float | None], None]:
    """One node's update at the node's defaults: I = J = 4, G = 8, four passes."""
    sampled = sampled_groups(pool, ["n0", "n1"], tasks=4, size=8)
    groups = sampled["n0"] + as_peers(sampled["n1"])

    def update(gap: float | None) -> None:
        with pool.activate("n0") as model:
            optimizer = torch.optim.SGD(pool.adapter_parameters("n0").values(), lr=0.0)
            share = TrainShare(groups, optimizer)
            train_together(model, pool.base.tokenizer, config(gap, 16), [share])

    return update


def median_seconds(update: Callable[[float | None], None], repeats: int) -> dict[str, float]:
    """Medians of the update without the rule and with it (a gap no group exceeds)."""
    sides = {"without": None, "with": 1e6}
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    for repeat in range(repeats + 1):
        for side, gap in sides.items():
            started = time.perf_counter()
            update(gap)
            if repeat:  # the first of each is a warm-up
                seconds[side].append(time.perf_counter() - started)
    return {side: statistics.median(values) for side, values in seconds.items()}


def main() -> None:
    args = bench_arguments(__doc__, "updates of each side")

    pool, _ = experiment_pool()
    for name, workload in (("experiment", experiment), ("node", node)):
        medians = median_seconds(workload(pool), args.repeats)
        ratio = medians["with"] / medians["without"]
        print(f"{name}: without the rule {medians['without']:.3f} s, with it "
              f"{medians['with']:.3f} s (median of {args.repeats}): the rule costs "
              f"{ratio:.2f}x the update")  # fmt: skip


if __name__ == "__main__":
    main()
