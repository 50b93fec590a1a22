#!/usr/bin/env python
"""What provenance costs: the seeded sampler against torch's multinomial, and the recompute.

The workload of one round on the shipped SmolLM2-135M, fp32: ``--prompts`` task prompts of the
default preset x G completions x ``--new-tokens`` tokens. Measured in one run, interleaved
(``--repeats`` times each, the median kept), same prompts, same decode loop:

- multinomial: the sampler before provenance (softmax, then ``torch.multinomial`` with a seeded
               ``torch.Generator``), patched into ``node.policy.generation``;
- seeded:      ``swarm.sample/1`` (float64 cumulative softmax, the pick of each row's ``u_t``).

Both decode exactly ``--new-tokens`` per sequence (no stop tokens), so the ratio is the cost per
token and not luck in answer lengths. Then the recompute: the groups teacher-forced through the
model (``node.provenance.recompute.batch_margins``) one at a time (the baseline), c at a time and
all together, their seconds against the batch's generation, the worst honest margin seen (what
the tolerance must absorb), what a node's share of the committee checks costs (about m seats per
batch recompute c groups each, so about m checks per node and round), and what a receiver's
recompute of the J peer groups it trains on costs (``node.provenance.peer_check``: J groups,
and decoding and loading each publisher's adapter). Last, the adapter a node stores each round
(``swarm.adapter/1``): its bytes, and what zstd would save.
``--adapter`` takes a checkpoint's ``adapter_model.safetensors`` (e.g. one from an experiment's
``units/*/node-*/round-*/``); without it, a fresh default adapter (rank 16 on attention and MLP)
with random B, the worst case for compression.

On a 2-core machine, stop other heavy work first: the two variants share the cores with it.
Usage: .venv/bin/python scripts/bench_provenance.py [--prompts 8] [--group 8] [--new-tokens 32]
       [--repeats 3] [--threads N] [--adapter PATH] [--round-seconds 120] [--external-groups 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import torch
import zstandard
from safetensors.torch import load_file

from node.defaults import SHIPPED_MODEL
from node.policy import generation
from node.policy.adapters import LORA_TARGETS, AdapterPool, LoraSettings, OptimizerSettings
from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.model import encode_prompts, load_base
from node.provenance.adapter import decode_adapter, encode_adapter
from node.provenance.choice import CHECKED_GROUPS, RECOMPUTING_SEATS
from node.provenance.recompute import GroupToCheck, batch_margins
from node.provenance.seeds import batch_seeds
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset
from node.tasks.prompts import build_messages

PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def task_prompts(tokenizer, count: int) -> list[list[int]]:  # type: ignore[no-untyped-def]
    preset = get_preset(DEFAULT_PRESET_NAME)
    items, round_seed = [], 0
    while len(items) < count:
        items += derive_tasks(round_seed.to_bytes(32, "big"), PEER, preset)
        round_seed += 1
    return encode_prompts(tokenizer, [build_messages(item) for item in items[:count]])


def multinomial_sampler(generator: torch.Generator):  # type: ignore[no-untyped-def]
    """The sampler the node used before ``swarm.sample/1`` (temperature 1, no top-p)."""

    def sample(logits, sampling, seeds, position):  # type: ignore[no-untyped-def]
        logits = logits.float()
        probs = torch.softmax(logits, dim=-1)
        tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        return tokens, generation._chosen_logprob(logits, tokens)

    return sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--adapter", help="a checkpoint's adapter_model.safetensors to measure")
    parser.add_argument(
        "--external-groups", type=int, default=4, help="J, the peer groups trained on per round"
    )
    parser.add_argument("--round-seconds", type=float, default=120.0, help="a round's length")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    base = load_base(SHIPPED_MODEL, dtype="float32")
    model, tokenizer = base.model, base.tokenizer
    prompts = task_prompts(tokenizer, args.prompts)
    seeds = batch_seeds(bytes(32), PEER, range(len(prompts)), args.group)
    sampling = SamplingConfig(max_new_tokens=args.new_tokens)
    request = GenerationRequest(prompts, completion_seeds=seeds)
    print(
        f"{base.name}, fp32, {torch.get_num_threads()} threads: {len(prompts)} prompts "
        f"({min(map(len, prompts))}-{max(map(len, prompts))} tokens) x G={args.group} x "
        f"{args.new_tokens} new tokens"
    )

    def run() -> tuple[float, list]:  # type: ignore[type-arg]
        started = time.perf_counter()
        (groups,) = generate_together(
            model, tokenizer, [request], num_completions=args.group, sampling=sampling, stop_ids=[]
        )
        return time.perf_counter() - started, groups

    run()  # warm up
    times: dict[str, list[float]] = {"multinomial": [], "seeded": []}
    groups: list = []  # type: ignore[type-arg]
    for _ in range(args.repeats):
        with mock.patch.object(generation, "_sample", multinomial_sampler(torch.Generator())):
            times["multinomial"].append(run()[0])
        seconds, groups = run()
        times["seeded"].append(seconds)
    tokens = len(prompts) * args.group * args.new_tokens
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        print(f"{name:12s} {seconds:6.2f} s  {tokens / seconds:7.1f} tokens/s")
    ratio = medians["seeded"] / medians["multinomial"]
    print(f"seeded / multinomial: {ratio:.3f}x the time ({(ratio - 1) * 100:+.1f} %)")

    worst, recompute = recompute_seconds(model, prompts, groups, seeds, args.repeats)
    per_group = recompute["together"] / len(prompts)
    print(
        f"recompute    {per_group:6.2f} s per group of {args.group}, {recompute['together']:.2f} s "
        f"for the batch: {recompute['together'] / medians['seeded']:.2f}x its generation"
    )
    for name, seconds in recompute.items():
        print(
            f"  {name:14s} {seconds:6.2f} s  {recompute['one by one'] / seconds:5.2f}x "
            "faster than one by one"
        )
    print(f"worst honest margin {worst:.3e} (>= 0 means every token is the seeded pick)")
    check = recompute[f"by {CHECKED_GROUPS}"] / (len(prompts) / CHECKED_GROUPS)
    node_round = RECOMPUTING_SEATS * check  # about m seats per batch, so about m checks per node
    print(
        f"check        {check:6.2f} s per recomputing seat (c = {CHECKED_GROUPS} groups); "
        f"{node_round:.2f} s per node and round (m = {RECOMPUTING_SEATS}): "
        f"{node_round / args.round_seconds * 100:.1f} % of a {args.round_seconds:.0f}-s round"
    )
    pool = AdapterPool(base)
    state = adapter_bytes(pool, args.adapter)
    load = adapter_load_seconds(pool, state)
    alone = recompute["one by one"] / len(prompts)  # a receiver's J groups: mostly one per batch
    training = args.external_groups * (alone + load)
    print(
        f"training     {training:6.2f} s per node and round to recompute J = "
        f"{args.external_groups} peer groups ({load:.2f} s of it per adapter decoded and "
        f"loaded): {training / args.round_seconds * 100:.1f} % of a "
        f"{args.round_seconds:.0f}-s round"
    )


def recompute_seconds(model, prompts, groups, seeds, repeats: int):  # type: ignore[no-untyped-def]
    """The worst honest margin, and the seconds to recompute every group (median of
    ``repeats``, interleaved): one group at a time (``group_margins``, how it was done before
    a batch's groups shared a pass), c at a time (what a committee seat checks of a batch) and
    all together (``batch_margins``)."""
    checks = [
        GroupToCheck(prompt, [c.token_ids for c in group], row)
        for prompt, group, row in zip(prompts, groups, seeds, strict=True)
    ]
    ways = {
        "one by one": 1,
        f"by {CHECKED_GROUPS}": CHECKED_GROUPS,
        "together": len(checks),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    worst = float("inf")
    for _ in range(repeats):
        for name, size in ways.items():
            started = time.perf_counter()
            margins = [
                m
                for start in range(0, len(checks), size)
                for group in batch_margins(model, checks[start : start + size])
                for m in group
            ]
            times[name].append(time.perf_counter() - started)
            worst = min(worst, *(m.worst for m in margins))
    return worst, {name: statistics.median(values) for name, values in times.items()}


def adapter_load_seconds(pool, state) -> float:  # type: ignore[no-untyped-def]
    """Seconds to decode a publisher's adapter bytes and load them into a scratch adapter (what a
    receiver does once per peer batch it trains on), median of three."""
    data = encode_adapter(state)
    lora = LoraSettings(rank=16, alpha=32, target_modules=LORA_TARGETS["attention+mlp"])
    times = []
    for _ in range(3):
        started = time.perf_counter()
        with pool.borrowed(lora, decode_adapter(data)):
            pass
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def adapter_bytes(pool, path: str | None):  # type: ignore[no-untyped-def]
    """Prints the size of the adapter a node stores per round and zstd's ratio on it; returns
    the adapter."""
    if path:
        state, what = load_file(path), path
    else:
        lora = LoraSettings(rank=16, alpha=32, target_modules=LORA_TARGETS["attention+mlp"])
        pool.add("bench", lora, OptimizerSettings(), seed=0)
        draws = torch.Generator().manual_seed(0)
        state = {
            k: torch.randn(v.shape, generator=draws) * 0.01 if "lora_B" in k else v
            for k, v in pool.adapter_state("bench").items()
        }
        what = "a fresh rank-16 attention+mlp adapter, random B"
    data = encode_adapter(state)
    packed = zstandard.ZstdCompressor(level=3).compress(data)
    print(
        f"adapter      {len(data) / 1e6:.2f} MB per node and round ({what}); zstd -3: "
        f"{len(packed) / len(data):.3f}x the bytes"
    )
    return state


if __name__ == "__main__":
    main()
