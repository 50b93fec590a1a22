#!/usr/bin/env python
"""Experiment throughput: node-rounds per hour of today's code against an earlier revision.

Runs ``swarm experiment --inprocess`` (the shipped SmolLM2, 4 nodes, the experiment's default
settings: 4 tasks x G=4, 16 new tokens, configuration 2/2) in subprocesses, alternating:

- ``baseline``: the tree of ``--baseline`` (default 38f4176, the last commit before nodes were
  batched), extracted with ``git archive`` into a temporary folder and run with this
  interpreter (same packages);
- ``new``: this tree, defaults (nodes batched, prompts shared, bf16 update where native);
- with ``--ablations`` also this tree with one lever off at a time: ``--no-batch-nodes``,
  ``--no-share-prompts``, ``--precision float32``.

Throughput counts the rounds after the first (the runner's progress lines give each round's
wall seconds; model loading and the first round's warm-up are left out on both sides). Prints
each run, the medians and the ratios to the baseline measured in the same invocation.

It also measures the machine's GEMM peak (fp32 and bf16, 4096 x 576 x 1536) and the share of it
that one batched GRPO update of 4 nodes reaches (FLOPs: 4 x decoder parameters x tokens run + 4 x
vocabulary x hidden x completion tokens, forward and input gradients of the frozen base; a
prompt prefix shared within a node runs once and is counted once; padding, attention and the
LoRA products are not counted).

Usage: .venv/bin/python scripts/bench_experiment.py [--rounds 4] [--pairs 2] [--ablations]
       [--baseline REV] [--threads 2]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = "38f4176"
# the runner's progress line: "... round 2/5: reward ..., 14s, elapsed ..." (wall seconds)
ROUND_LINE = re.compile(r" round \d+/\d+: reward .*?, (\d+)s, elapsed")


def node_rounds_per_hour(tree: Path, extra: list[str], args: argparse.Namespace) -> float:
    """One experiment run in ``tree``; node-rounds/hour over its rounds after the first."""
    with tempfile.TemporaryDirectory(prefix="bench-exp-") as out:
        command = [
            sys.executable, "-m", "node.cli", "experiment", "--out", out, "--inprocess",
            "--nodes", str(args.nodes), "--rounds", str(args.rounds + 1), "--config", "2/2",
            "--seed", "0", "--threads", str(args.threads), *extra,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=tree, env={**_env(), "PYTHONPATH": str(tree)}, check=True,
            capture_output=True, text=True,
        )  # fmt: skip
    seconds = [int(s) for s in ROUND_LINE.findall(done.stdout)]
    if len(seconds) != args.rounds + 1:
        raise RuntimeError(f"expected {args.rounds + 1} round lines:\n{done.stdout[-2000:]}")
    return args.nodes * args.rounds / sum(seconds[1:]) * 3600


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def baseline_tree(revision: str, folder: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tempfile.NamedTemporaryFile(suffix=".tar") as tar:
        tar.write(archive)
        tar.flush()
        with tarfile.open(tar.name) as t:
            t.extractall(folder, filter="data")
    return folder


def gemm_peak(dtype_name: str, threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(4096, 576, dtype=dtype), torch.randn(576, 1536, dtype=dtype)
    for _ in range(3):
        a @ b
    started, reps = time.perf_counter(), 20
    for _ in range(reps):
        a @ b
    return 2 * 4096 * 576 * 1536 * reps / (time.perf_counter() - started) / 1e9


def training_share_of_peak(args: argparse.Namespace, peak: dict[str, float]) -> str:
    """One batched GRPO update of 4 nodes' groups: seconds, model GFLOP/s, share of peak."""
    import torch

    from node.learning_data import ScoredGroup
    from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings
    from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
    from node.policy.grpo import GRPOConfig, TrainShare, train_together
    from node.policy.model import encode_prompts, load_base
    from node.policy.precision import describe, resolve_precision
    from node.tasks import build_messages, derive_tasks, get_preset

    torch.set_num_threads(args.threads)
    base = load_base("smollm2-135m")
    pool, names = AdapterPool(base), [f"n{i}" for i in range(args.nodes)]
    for i, name in enumerate(names):
        pool.add(name, LoraSettings(), OptimizerSettings(lr=5e-4), seed=i)
    preset, tokenizer = get_preset("smol-easy"), base.tokenizer
    prompts = [
        encode_prompts(tokenizer, [build_messages(t) for t in derive_tasks(
            bytes(32), f"0x{i + 1:040x}", preset)[:4]])
        for i in range(args.nodes)
    ]  # fmt: skip
    requests = [GenerationRequest(p, i, n) for i, (p, n) in enumerate(zip(prompts, names))]
    with pool.rows(names) as routing:
        samples = generate_together(
            pool.model, tokenizer, requests, num_completions=4,
            sampling=SamplingConfig(max_new_tokens=16), routing=routing,
        )  # fmt: skip
    groups = [
        [ScoredGroup(list(p), list(g), [1.0, 0.0, 0.5, 0.0]) for p, g in zip(ps, gs)]
        for ps, gs in zip(prompts, samples)
    ]
    lines = []
    for precision in ("float32", "auto"):
        config = GRPOConfig(max_completion_tokens=16, precision=precision)
        shares = [TrainShare(g, pool.optimizer(n), n) for g, n in zip(groups, names)]
        times = []
        for _ in range(3):
            started = time.perf_counter()
            with pool.rows(names, trainable=True) as routing:
                train_together(pool.model, tokenizer, config, shares, routing=routing)
            times.append(time.perf_counter() - started)
        seconds = statistics.median(times)
        flops = _model_flops(base.model, groups)
        dtype = resolve_precision(precision, torch.device("cpu"))
        reference = peak["bfloat16" if dtype is torch.bfloat16 else "float32"]
        lines.append(
            f"  {describe(precision)}: {seconds:.2f} s, {flops / seconds / 1e9:.0f} GFLOP/s = "
            f"{flops / seconds / 1e9 / reference:.0%} of the {reference:.0f} GFLOP/s peak"
        )
    return "\n".join(lines)


def _model_flops(model, groups) -> float:  # type: ignore[no-untyped-def]
    from node.policy.prefill import tokens_run

    vocab, hidden = model.get_output_embeddings().weight.shape
    decoder = sum(p.numel() for p in model.get_decoder().parameters()) - vocab * hidden
    prompts = [list(g.prompt) for node in groups for g in node]
    owners = [k for k, node in enumerate(groups) for _ in node]
    prompt = tokens_run(prompts, owners)  # each shared part of the prompts once
    answers = sum(len(c.token_ids) for node in groups for g in node for c in g.completions)
    # forward 2 + input gradients 2 per weight and token: the base is frozen, so no weight
    # gradients (the rank-16 LoRA products are not counted, nor is attention)
    return 4 * decoder * (prompt + answers) + 4 * vocab * hidden * answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--ablations", action="store_true")
    args = parser.parse_args()

    peak = {d: gemm_peak(d, args.threads) for d in ("float32", "bfloat16")}
    print(f"GEMM peak, 4096x576x1536: fp32 {peak['float32']:.0f} GFLOP/s, "
          f"bf16 {peak['bfloat16']:.0f} GFLOP/s")  # fmt: skip
    variants: dict[str, tuple[str, list[str]]] = {"baseline": ("base", []), "new": ("new", [])}
    if args.ablations:
        variants |= {
            "new --no-batch-nodes": ("new", ["--no-batch-nodes"]),
            "new --no-share-prompts": ("new", ["--no-share-prompts"]),
            "new --precision float32": ("new", ["--precision", "float32"]),
        }
    results: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="bench-base-") as folder:
        trees = {"base": baseline_tree(args.baseline, Path(folder)), "new": ROOT}
        for pair in range(args.pairs):
            for name, (tree, extra) in variants.items():
                rate = node_rounds_per_hour(trees[tree], extra, args)
                results[name].append(rate)
                print(f"pair {pair + 1}: {name}: {rate:.0f} node-rounds/hour", flush=True)
    reference = statistics.median(results["baseline"])
    print(f"\n{args.nodes} nodes, {args.rounds} rounds after the first, {args.pairs} runs each:")
    for name, rates in results.items():
        median = statistics.median(rates)
        print(f"  {name}: {median:.0f} node-rounds/hour ({median / reference:.2f}x baseline)")
    print("\nOne batched GRPO update of the nodes' groups (4 groups x G=4 each):")
    print(training_share_of_peak(args, peak))


if __name__ == "__main__":
    main()
