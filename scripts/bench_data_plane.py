#!/usr/bin/env python
"""Data-plane throughput: producing and verifying a realistic rollout batch, against raw parsing.

A batch of 8 groups x 8 completions x ~300 tokens (~1,200 characters each, with their token ids)
for ``paper-strict``, whose limit (512 tokens per completion) such answers fit.
Measured in one run, on the same bytes:

- baseline: ``sha256(bytes)`` + ``json.loads(bytes)``, the least any receiver must do;
- produce:  sign the body (EIP-712) + canonical encoding + ``LocalStore.put``;
- receive:  ``LocalStore.get`` + ``verify_batch`` (digest, strict decode, signature, body checks,
  task regeneration from the round seed, token ids counted and decoded, re-scoring every
  completion).

Prints batches per second for each and its cost as a multiple of the baseline.
Usage: .venv/bin/python scripts/bench_data_plane.py [--seconds 3] [--compress]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from eth_account import Account
from eth_utils import keccak

from node.chain.eip712 import Domain
from node.chain.events import RolloutsPublished
from node.policy.model import load_tokenizer
from node.policy.peer_ids import PeerIds, written_completion
from node.provenance.seeds import SAMPLER_ID
from node.rollouts import ModelInfo, encode_batch, sign_batch
from node.rollouts.schema import LoraShape
from node.rollouts.assemble import assemble_batch
from node.sampling.verify import RoundContext, verify_batch
from node.storage import LocalStore
from node.tasks import derive_tasks, get_preset

PEER = Account.from_key("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
DOMAIN = Domain(
    chain_id=31337,
    verifying_contract="0x5FbDB2315678afecb367f032d93F642f64180aa3",
    salt=bytes(32),  # any deployment's genesis seed
)
ROUND = 42
GROUPS, GROUP_SIZE, CHARS = 8, 8, 1200
PRESET = "paper-strict"
WORDS = "first add the tens then the ones so the total is carry one and check again".split()


def completion_text(rng: random.Random, answer: str | None, right: bool) -> str:
    words = []
    while sum(len(w) + 1 for w in words) < CHARS - 40:
        words.append(rng.choice(WORDS))
    final = answer if right else str(rng.randint(-99, 999))
    return " ".join(words) + f" <answer>{final}</answer>"


def placeholder_model(tokens: PeerIds) -> ModelInfo:
    """A batch's model section with placeholder base and adapter digests: right for every check
    but the provenance recompute, which nothing here runs."""
    return ModelInfo(
        name="HuggingFaceTB/SmolLM2-135M-Instruct",
        base="0x" + "ba" * 32,
        adapter="0x" + "ab" * 32,
        lora=LoraShape(rank=16, alpha=32, targets=["k_proj", "o_proj", "q_proj", "v_proj"]),
        sampler=SAMPLER_ID,
        tokenizer=tokens.digest,
    )


def per_second(work: Callable[[], object], seconds: float) -> float:
    work()  # warm caches (scorers, demos, dataset objects)
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        work()
        count += 1
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--compress", action="store_true", help="zstd-compress the batch")
    args = parser.parse_args()

    seed = keccak(b"bench" + ROUND.to_bytes(8, "big"))
    tasks = derive_tasks(seed, PEER.address, get_preset(PRESET))[:GROUPS]
    rng = random.Random(0)
    texts = [[completion_text(rng, t.answer, i % 2 == 0) for i in range(GROUP_SIZE)] for t in tasks]
    tokens = PeerIds(load_tokenizer())
    model = placeholder_model(tokens)
    encoded = assemble_batch(
        account=PEER,
        domain=DOMAIN,
        round=ROUND,
        preset=PRESET,
        model=model,
        tasks=tasks,
        samples=[[written_completion(tokens.tokenizer, text) for text in group] for group in texts],
        compress=args.compress,
    )
    body, data = encoded.batch.body, encoded.data
    commitment = RolloutsPublished(
        block_number=1,
        block_hash="0x" + "11" * 32,
        tx_hash="0x" + "22" * 32,
        log_index=0,
        round=ROUND,
        peer=PEER.address,
        digest=encoded.digest,
        groups=encoded.groups,
        completions=encoded.completions,
        reward_sum=encoded.reward_sum_milli,
        relayer=None,
    )
    context = RoundContext(
        domain=DOMAIN,
        round=ROUND,
        round_seed=seed,
        tasks_per_round=GROUPS,
        group_size=GROUP_SIZE,
        tokens=tokens,
        bases=frozenset({model.base}),
    )
    plain = encode_batch(encoded.batch) if args.compress else data

    with tempfile.TemporaryDirectory() as folder:
        store = LocalStore(Path(folder))
        digest = store.put(data)

        def baseline() -> None:
            hashlib.sha256(plain).digest()
            json.loads(plain)

        def produce() -> None:
            store.put(encode_batch(sign_batch(body, PEER, DOMAIN), compress=args.compress))

        def receive() -> None:
            verdict = verify_batch(store.get(digest), commitment, context)
            assert verdict.accepted, verdict.detail

        rates = {
            name: per_second(work, args.seconds)
            for name, work in (("baseline", baseline), ("produce", produce), ("receive", receive))
        }

    print(
        f"batch: {GROUPS} groups x {GROUP_SIZE} completions x ~{CHARS} chars; "
        f"{len(data):,} bytes stored ({'zstd' if args.compress else 'plain JSON'}), "
        f"{len(plain):,} bytes of JSON"
    )
    print(f"{'stage':<52}{'batches/s':>12}{'x baseline cost':>18}")
    labels = {
        "baseline": "sha256 + json.loads (baseline)",
        "produce": "sign + encode + store.put",
        "receive": "store.get + verify (decode, signature, tasks, re-score)",
    }
    for name, rate in rates.items():
        print(f"{labels[name]:<52}{rate:>12.1f}{rates['baseline'] / rate:>18.1f}")


if __name__ == "__main__":
    main()
