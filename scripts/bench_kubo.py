#!/usr/bin/env python
"""Kubo against the local store, on the same real rollout batches, in one run.

Starts two private Kubo daemons (node.local.kubo: one swarm key, loopback) and a LocalStore in
a temporary folder, builds N distinct signed batches (8 groups x 8 completions x ~1,200
characters, like scripts/bench_data_plane.py) and measures, each batch new to the store:

- put+get throughput: ``put`` then ``get`` of every batch, on the LocalStore and on daemon A;
- fetch latency: every batch pinned on A, then fetched through B's own API (bitswap from A,
  connected with ``B.connect(A.endpoint())``), against a ``get`` on A itself and on the
  LocalStore; and the same with 16 threads at once, as a node fetches a round's batches.

Prints a table with the ratios. Usage: .venv/bin/python scripts/bench_kubo.py [--batches 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_utils import keccak

from node.chain.eip712 import Domain
from node.local.kubo import new_swarm_key, start_kubo
from node.learning_data import GeneratedCompletion
from node.provenance.seeds import SAMPLER_ID
from node.rollouts import ModelInfo, encode_batch, sign_batch
from node.rollouts.schema import LoraShape
from node.rollouts.assemble import assemble_batch
from node.storage import ContentStore, LocalStore
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset

PEER = Account.from_key("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
DOMAIN = Domain(chain_id=31337, verifying_contract="0x5FbDB2315678afecb367f032d93F642f64180aa3")
GROUPS, GROUP_SIZE, CHARS = 8, 8, 1200
WORDS = "first add the tens then the ones so the total is carry one and check again".split()


def completion_text(rng: random.Random, answer: str | None) -> str:
    words = []
    while sum(len(w) + 1 for w in words) < CHARS - 40:
        words.append(rng.choice(WORDS))
    return " ".join(words) + f" <answer>{answer}</answer>"


def _written(text: str) -> GeneratedCompletion:
    """A completion of ``text`` as one claimed token per word (nothing here decodes them)."""
    ids = tuple(range(1, len(text.split()) + 1))
    return GeneratedCompletion(text, ids, "length", (0.0,) * len(ids))


def real_batches(count: int) -> list[bytes]:
    """``count`` distinct encoded batches: one assembled (scored, signed), then re-signed for
    ``count`` rounds, as a node publishes one per round."""
    rng = random.Random(0)
    tasks = derive_tasks(keccak(b"bench"), PEER.address, get_preset(DEFAULT_PRESET_NAME))[:GROUPS]
    texts = [[completion_text(rng, t.answer) for _ in range(GROUP_SIZE)] for t in tasks]
    body = assemble_batch(
        account=PEER,
        domain=DOMAIN,
        round=0,
        preset=DEFAULT_PRESET_NAME,
        model=ModelInfo(  # base, adapter and tokenizer are placeholders: nothing here verifies
            name="HuggingFaceTB/SmolLM2-135M-Instruct",
            base="0x" + "ba" * 32,
            adapter="0x" + "ab" * 32,
            lora=LoraShape(rank=16, alpha=32, targets=["k_proj", "o_proj", "q_proj", "v_proj"]),
            sampler=SAMPLER_ID,
            tokenizer="0x" + "cd" * 32,
        ),
        tasks=tasks,
        samples=[[_written(text) for text in group] for group in texts],
    ).batch.body
    return [
        encode_batch(sign_batch(body.model_copy(update={"round": round}), PEER, DOMAIN))
        for round in range(count)
    ]


def put_get_rate(store: ContentStore, batches: list[bytes]) -> float:
    """Batches per second of ``put`` then ``get``, each batch once."""
    started = time.perf_counter()
    for data in batches:
        assert store.get(store.put(data)) == data
    return len(batches) / (time.perf_counter() - started)


def latencies(fetch: Callable[[bytes], bytes], digests: list[bytes]) -> list[float]:
    """Seconds of each ``fetch(digest)``."""
    times = []
    for digest in digests:
        started = time.perf_counter()
        fetch(digest)
        times.append(time.perf_counter() - started)
    return times


def concurrent_rate(fetch: Callable[[bytes], bytes], digests: list[bytes], workers: int) -> float:
    """Batches per second of ``fetch`` over ``digests`` with ``workers`` threads, as a node's
    intake fetches a round's batches (node.sampling.fetch)."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(fetch, digests))
    return len(digests) / (time.perf_counter() - started)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def measure(folder: Path, batches: list[bytes], workers: int) -> dict[str, object]:
    """Every figure of one run, on thirds of ``batches`` (each batch new to the store)."""
    n = len(batches) // 3
    for_throughput, for_latency, for_concurrent = batches[:n], batches[n : 2 * n], batches[2 * n :]
    key = new_swarm_key()
    a, b = start_kubo(folder / "a", key), start_kubo(folder / "b", key)
    try:
        local_store = LocalStore(folder / "local")
        a_store, b_store = a.store(), b.store(timeout=30.0)
        figures: dict[str, object] = {
            "put_get_local": put_get_rate(local_store, for_throughput),
            "put_get_kubo": put_get_rate(a_store, for_throughput),
        }
        b_store.connect(a_store.endpoint())
        digests = [a_store.put(data, pin=True) for data in for_latency]
        for data in for_latency:
            local_store.put(data)
        figures["get_b"] = latencies(b_store.get, digests)  # first fetch: bitswap from A
        figures["get_a"] = latencies(a_store.get, digests)
        figures["get_local"] = latencies(local_store.get, digests)
        more = [a_store.put(data, pin=True) for data in for_concurrent]
        figures["many_a"] = concurrent_rate(a_store.get, more, workers)
        figures["many_b"] = concurrent_rate(b_store.get, more, workers)
        return figures
    finally:
        a.stop()
        b.stop()


def report(figures: dict[str, Any], batches: list[bytes], workers: int) -> None:
    size = statistics.mean(len(d) for d in batches)
    print(
        f"\n{len(batches) // 3} batches per measurement: {GROUPS} groups x {GROUP_SIZE} "
        f"completions, ~{size / 1000:.0f} kB each (plain JSON); two daemons on loopback"
    )
    local, kubo = figures["put_get_local"], figures["put_get_kubo"]
    print(f"\n{'put + get, each batch new':<46}{'batches/s':>10}{'x local':>10}")
    print(f"{'LocalStore (a folder, fsync per blob)':<46}{local:>10.0f}{1.0:>10.2f}")
    print(f"{'KuboStore (RPC API, flatfs without fsync)':<46}{kubo:>10.0f}{kubo / local:>10.2f}")
    base = statistics.median(figures["get_local"])
    print(f"\n{'get of one batch':<46}{'median ms':>10}{'p95 ms':>10}{'x local':>10}")
    for label, key in (
        ("LocalStore", "get_local"),
        ("Kubo A, block held by A", "get_a"),
        ("Kubo B, from A over bitswap", "get_b"),
    ):
        median = statistics.median(figures[key])
        print(
            f"{label:<46}{median * 1000:>10.2f}{p95(figures[key]) * 1000:>10.2f}"
            f"{median / base:>10.1f}"
        )
    many_a, many_b = figures["many_a"], figures["many_b"]
    print(f"\n{f'get with {workers} threads (a round intake)':<46}{'batches/s':>10}{'x A':>10}")
    print(f"{'Kubo A, block held by A':<46}{many_a:>10.0f}{1.0:>10.2f}")
    print(f"{'Kubo B, from A over bitswap':<46}{many_b:>10.0f}{many_b / many_a:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=200, help="distinct batches per measurement")
    parser.add_argument("--workers", type=int, default=16, help="threads of the concurrent fetch")
    args = parser.parse_args()
    print(f"building {3 * args.batches} distinct batches ...", flush=True)
    batches = real_batches(3 * args.batches)
    with tempfile.TemporaryDirectory(prefix="bench-kubo-") as folder:
        figures = measure(Path(folder), batches, args.workers)
    report(figures, batches, args.workers)


if __name__ == "__main__":
    main()
