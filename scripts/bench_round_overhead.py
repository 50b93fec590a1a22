#!/usr/bin/env python
"""Protocol overhead of a round: the share of a node's busy time outside generation and training.

Runs the local swarm (Anvil, the deployed coordinator, a local content store, N nodes over the
shipped SmolLM2-135M by default) for R rounds in lockstep, exactly as ``swarm local up`` does,
and adds up each node's phase timings from its round reports:

- learning (the baseline, measured in the same run): ``generate`` and ``train``;
- overhead: ``sign`` (scoring, canonical JSON, EIP-712 signature), ``store`` (put/get),
  ``chain`` (publication checks, publish, event reads, seal, commit, reveal, settle),
  ``verify`` (fetching and re-scoring the sampled and committee batches), ``checkpoint``
  (adapter, optimizer and state files).

Prints seconds per phase, the overhead as a share of busy time and as a ratio to learning time,
against the 5 % target. Time waiting for peers is not busy time (lockstep never waits). The nodes
generate and train in one batched pass, during which every node's ``generate`` or ``train`` timer
runs: learning is the sum over nodes divided by N (the pass, once), and the overhead is every
node's own protocol work, summed. (Until 2026-12-02 learning was summed over nodes, which made
the overhead look about 3x smaller than it is.)
With ``--stores local kubo`` (the default) the same swarm runs twice in one invocation, on one
shared store folder and on a private Kubo daemon per node (fetches over bitswap), and the last
line compares their overheads.
Usage: .venv/bin/python scripts/bench_round_overhead.py [--nodes 3] [--rounds 3] [--model M]
       [--tasks 4] [--group-size 4] [--max-new-tokens 24] [--threads N] [--stores local kubo]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from node.config import with_overrides
from node.local.anvil import free_port
from node.local.swarm import DEMO_NODE, LocalSwarmSettings
from node.local.up import run_local_swarm
from node.round.report import IDLE_PHASES, LEARNING_PHASES, RoundReport

TARGET = 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    demo = DEMO_NODE
    parser.add_argument("--model", default=demo.model.source)
    parser.add_argument("--tasks", type=int, default=demo.tasks.tasks_per_round)
    parser.add_argument("--group-size", type=int, default=demo.sampling.group_size)
    parser.add_argument("--max-new-tokens", type=int, default=demo.generation.max_new_tokens)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--stores", nargs="+", choices=("local", "kubo"), default=["local", "kubo"])
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    overheads = {}
    for store in args.stores:
        reports, wall = run(args, store)
        overheads[store] = print_table(reports, args, wall, store)
        print()
    if len(overheads) == 2:
        local, kubo = overheads["local"], overheads["kubo"]
        print(
            f"overhead with Kubo {kubo[0]:.2f}s ({kubo[1]:.2%} of busy time) vs the local store "
            f"{local[0]:.2f}s ({local[1]:.2%}): {kubo[0] / local[0]:.2f}x"
        )


def run(args: argparse.Namespace, store: str) -> tuple[list[RoundReport], float]:
    with tempfile.TemporaryDirectory() as workdir:
        node = with_overrides(
            DEMO_NODE,
            {
                "model": {"source": args.model},
                "tasks": {"tasks_per_round": args.tasks},
                "sampling": {"group_size": args.group_size},
                "generation": {"max_new_tokens": args.max_new_tokens},
            },
        )
        settings = LocalSwarmSettings(
            nodes=args.nodes,
            rounds=args.rounds,
            workdir=Path(workdir) / "swarm",
            anvil_port=free_port(),
            indexer=False,
            node=node,
            store=store,
        )
        started = time.perf_counter()
        reports = run_local_swarm(settings, echo=lambda line: None)
        return reports, time.perf_counter() - started


def print_table(
    reports: list[RoundReport], args: argparse.Namespace, wall: float, store: str
) -> tuple[float, float]:
    """Prints the phase table; returns the overhead in seconds and as a share of busy time."""
    phases: dict[str, float] = defaultdict(float)
    for report in reports:
        for phase, seconds in report.timings.seconds.items():
            phases[phase] += seconds
    # The nodes generate and train in one shared pass (rendezvous), and each node's timer runs
    # for the whole of it: summed over nodes, learning would count once per node. Counted once.
    learning = sum(phases.get(p, 0.0) for p in LEARNING_PHASES) / args.nodes
    overhead = sum(s for p, s in phases.items() if p not in {*IDLE_PHASES, *LEARNING_PHASES})
    busy = learning + overhead
    print(
        f"{store} store: {args.nodes} nodes x {args.rounds} rounds on {args.model}: "
        f"{args.tasks} tasks x "
        f"G={args.group_size}, <= {args.max_new_tokens} new tokens; "
        f"{torch.get_num_threads()} torch threads; whole run {wall:.1f}s (incl. setup)"
    )
    print(f"{'phase':<12}{'seconds':>10}{'share of busy':>16}")
    for phase, seconds in sorted(phases.items(), key=lambda item: -item[1]):
        if phase in IDLE_PHASES:
            continue
        shared = phase in LEARNING_PHASES
        seconds = seconds / args.nodes if shared else seconds
        kind = "learning (shared pass, once)" if shared else "overhead (every node's own)"
        print(f"{phase:<12}{seconds:>10.2f}{seconds / busy:>15.1%}  {kind}")
    share = overhead / busy
    print(
        f"overhead {overhead:.2f}s = {share:.2%} of busy time "
        f"({overhead / learning:.3f}x the learning baseline of {learning:.1f}s); "
        f"target < {TARGET:.0%}: {'met' if share < TARGET else 'NOT met'}"
    )
    return overhead, share


if __name__ == "__main__":
    main()
