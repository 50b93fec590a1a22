#!/usr/bin/env python
"""A measured swarm of light peers: N registered peers (1,000 by default) play full rounds on
Anvil (publish, seal, commit, reveal, settle) at committee sizes k = 16, 32 and 64, while the
indexer follows live.

    .venv/bin/python scripts/scale_swarm.py                             # 1,000 peers, 3 rounds
    .venv/bin/python scripts/scale_swarm.py --peers 40 --committee 4    # a quick look

Peers are light: canned batches (their digests on-chain) and no model. The swarm is played by
``bench_indexer.play_swarm`` (impersonated accounts, real transactions executed by the real
contract; each peer commits and reveals a verdict on every seat the seat rule gives it). For each
k, reported with the baseline it is measured against in the same run:

- **gas** from the receipts, per function: per node-round (a publication, a commitment and a
  reveal, and a 1/N share of the seals, settlements and flag resolutions) and for the whole swarm
  per round; against a node-round without judging (the publication alone);
- **fetches and verifications per node-round**: its committee seats (one fetch and one
  verification each) and the ``sampling.fetch_peers`` batches a node fetches to train on;
- **judging time**: the mean seat count of a node-round judged for real, on canned signed batches
  of the deployment's shape (``LocalStore.get`` + ``verify_batch``: digest, decoding, signature,
  tasks, token ids, re-scoring; not the provenance recompute, which needs the model), as a share
  of a 120-s round; against ``sha256`` + ``json.loads`` of the same bytes;
- **the indexer live** (``swarm-indexer run`` in its own process, polling as it does in
  production): the seconds from each round's last block to the moment it had indexed it, against
  the round's length.

Then the largest k a chain sustaining a given gas rate carries (``--gas-per-second``).
Everything stays on 127.0.0.1 and every loop is bounded; docs/BENCHMARKS.md ("Scale") quotes one
run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from eth_account import Account

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# scripts/ is on the path when this runs as a script
from bench_data_plane import placeholder_model  # noqa: E402
from bench_indexer import (  # noqa: E402
    ROUND,
    Swarm,
    bench_chain,
    log,
    peer_addresses,
    play_swarm,
    serve,
)

from node.chain.eip712 import Domain  # noqa: E402
from node.chain.events import RolloutsPublished  # noqa: E402
from node.chain.rounds import round_seed  # noqa: E402
from node.config import SamplingSettings  # noqa: E402
from node.policy.model import load_tokenizer  # noqa: E402
from node.policy.peer_ids import PeerIds, written_completion  # noqa: E402
from node.rollouts.assemble import assemble_batch  # noqa: E402
from node.sampling.verify import RoundContext, verify_batch  # noqa: E402
from node.storage import LocalStore  # noqa: E402
from node.tasks import derive_tasks, get_preset  # noqa: E402

ROUND_SECONDS = 120  # the default round of a real deployment (DeployConfig.round_duration)
PRESET = "smol-strict"
#: Per-node functions; the rest (seals, settlements, flag resolutions) is shared by the swarm.
PER_NODE = ("publishRollouts", "commitVerdicts", "revealVerdicts")


@dataclass
class Run:
    """One committee size's figures."""

    k: int
    peers: int
    rounds: int
    gas: Counter[str]
    calls: Counter[str]
    seats: int
    registration_gas: int
    catch_ups: list[float] = field(default_factory=list)  # s to index each round's blocks
    judge_s: float = 0.0  # one node-round's seats, judged for real
    baseline_s: float = 0.0  # sha256 + json.loads of the same bytes

    @property
    def node_rounds(self) -> int:
        return self.peers * self.rounds

    @property
    def seats_per_node_round(self) -> float:
        return self.seats / self.node_rounds

    def per_node_round(self, function: str) -> float:
        return self.gas[function] / self.node_rounds

    @property
    def shared_per_node_round(self) -> float:
        shared = sum(g for f, g in self.gas.items() if f not in PER_NODE and f != "register")
        return shared / self.node_rounds

    @property
    def gas_per_node_round(self) -> float:
        return sum(self.per_node_round(f) for f in PER_NODE) + self.shared_per_node_round

    @property
    def swarm_gas_per_round(self) -> float:
        return self.gas_per_node_round * self.peers


# ---------------------------------------------------------------------- the indexer, live


class LagWatch:
    """The live indexer's lag: the chain's head minus the block ``/health`` says is indexed."""

    def __init__(self, swarm: Swarm, url: str) -> None:
        self.swarm, self.url = swarm, url
        self.session = requests.Session()

    def lag(self) -> int:
        head = int(self.swarm.rpc("eth_blockNumber"), 16)
        indexed = self.session.get(self.url + "health", timeout=30).json()["indexed_block"]
        return head - (indexed or 0)

    def catch_up(self, limit_s: float = 600) -> float:
        """Seconds until the indexer holds every block mined so far."""
        started = time.perf_counter()
        while self.lag() > 0:
            if time.perf_counter() - started > limit_s:
                raise RuntimeError(f"the indexer did not catch up within {limit_s:.0f} s")
            time.sleep(0.05)
        return time.perf_counter() - started


# ---------------------------------------------------------------------- judging, for real


def canned_batches(count: int, deployment: Any, round_: int) -> tuple[list, RoundContext]:
    """``count`` signed batches of the deployment's shape, each by its own key, all correct."""
    tokens = PeerIds(load_tokenizer())
    domain = Domain(
        chain_id=deployment.chain_id,
        verifying_contract=deployment.coordinator,
        salt=bytes.fromhex(deployment.genesis_seed[2:]),
    )
    seed = round_seed(bytes.fromhex(deployment.genesis_seed[2:]), round_)
    n, g = deployment.rules.tasks_per_round, deployment.rules.group_size
    model = placeholder_model(tokens)
    rng = random.Random(0)
    made = []
    for i in range(count):
        account = Account.from_key(hashlib.sha256(f"scale-judged-{i}".encode()).digest())
        tasks = derive_tasks(seed, account.address, get_preset(PRESET))[:n]
        samples = [
            [written_completion(tokens.tokenizer, _answer(rng, t.answer)) for _ in range(g)]
            for t in tasks
        ]
        encoded = assemble_batch(
            account=account, domain=domain, round=round_, preset=PRESET, model=model,
            tasks=tasks, samples=samples,
        )  # fmt: skip
        made.append((account.address, encoded))
    context = RoundContext(
        domain=domain, round=round_, round_seed=seed, tasks_per_round=n, group_size=g,
        tokens=tokens, bases=frozenset({model.base}),
    )  # fmt: skip
    return made, context


def _answer(rng: random.Random, answer: str) -> str:
    return f"<answer>{answer if rng.random() < 0.5 else rng.randint(0, 99)}</answer>"


def time_judging(seats: int, deployment: Any, work: Path) -> tuple[float, float]:
    """Seconds to fetch and verify ``seats`` distinct batches, and the baseline on their bytes."""
    made, context = canned_batches(max(1, seats), deployment, round_=1)
    store = LocalStore(work / "judged")
    commitments = []
    for peer, encoded in made:
        digest = store.put(encoded.data)
        commitments.append(
            RolloutsPublished(
                block_number=1, block_hash="0x" + "11" * 32, tx_hash="0x" + "22" * 32,
                log_index=0, round=1, peer=peer, digest=digest, groups=encoded.groups,
                completions=encoded.completions, reward_sum=encoded.reward_sum_milli,
                relayer=None,
            )
        )  # fmt: skip
    verify_batch(store.get(commitments[0].digest), commitments[0], context)  # warm caches
    started = time.perf_counter()
    for commitment in commitments[:seats]:
        verdict = verify_batch(store.get(commitment.digest), commitment, context)
        assert verdict.accepted, verdict.detail
    judged = time.perf_counter() - started
    started = time.perf_counter()
    for commitment in commitments[:seats]:
        data = store.get(commitment.digest)
        hashlib.sha256(data).digest()
        json.loads(data)
    return judged, time.perf_counter() - started


# ---------------------------------------------------------------------------------- a run


def run_swarm(peers: int, rounds: int, k: int, per_block: int, work: Path) -> Run:
    with bench_chain(work, k, gas_limit=4_000_000_000) as (anvil, w3, deployment):
        swarm = Swarm(anvil.url, w3, deployment.coordinator, per_block)
        server = serve(anvil.url, work)
        try:
            watch = LagWatch(swarm, server.url)
            catch_ups: list[float] = []
            tally = play_swarm(
                swarm, deployment, peer_addresses(peers), rounds, k,
                after_round=lambda now: catch_ups.append(watch.catch_up()),
            )  # fmt: skip
        finally:
            server.stop()
        registration = swarm.gas_by_function.pop("register")
        swarm.by_function.pop("register")
        result = Run(
            k=k, peers=peers, rounds=rounds, gas=swarm.gas_by_function,
            calls=swarm.by_function, seats=tally.seats, registration_gas=registration,
            catch_ups=catch_ups,
        )  # fmt: skip
    seats = round(result.seats_per_node_round)
    result.judge_s, result.baseline_s = time_judging(seats, deployment, work)
    return result


# --------------------------------------------------------------------------------- report


def report(runs: list[Run], gas_rates: list[float], fetch_peers: int) -> None:
    print()
    print(f"{runs[0].peers:,} peers, {runs[0].rounds} rounds judged through settlement per k")
    print()
    print("| k | gas per node-round | of which publish | commit | reveal | shared "
          "| x publish alone | swarm gas per round | gas/s at 120-s rounds |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in runs:
        publish = r.per_node_round("publishRollouts")
        print(
            f"| {r.k} | {r.gas_per_node_round:,.0f} | {publish:,.0f} "
            f"| {r.per_node_round('commitVerdicts'):,.0f} "
            f"| {r.per_node_round('revealVerdicts'):,.0f} | {r.shared_per_node_round:,.0f} "
            f"| {r.gas_per_node_round / publish:.1f} | {r.swarm_gas_per_round:,.0f} "
            f"| {r.swarm_gas_per_round / ROUND_SECONDS:,.0f} |"
        )
    print()
    print("| k | seats per node-round (fetch + verify each) | + training fetches "
          "| judging a node-round, s | share of a 120-s round | x sha256 + json.loads "
          "| indexer: a round's blocks indexed after, s (mean, max) "
          "| max share of a round |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in runs:
        print(
            f"| {r.k} | {r.seats_per_node_round:.1f} | {fetch_peers} | {r.judge_s:.2f} "
            f"| {100 * r.judge_s / ROUND_SECONDS:.1f} % | {r.judge_s / r.baseline_s:.0f} "
            f"| {statistics.mean(r.catch_ups):.2f}, {max(r.catch_ups):.2f} "
            f"| {100 * max(r.catch_ups) / ROUND_SECONDS:.1f} % |"
        )
    print()
    print("| chain gas rate | largest k measured that fits | peers it carries at that k |")
    print("| ---: | ---: | ---: |")
    for rate in gas_rates:
        fitting = [r for r in runs if r.swarm_gas_per_round / ROUND_SECONDS <= rate]
        best = max(fitting, key=lambda r: r.k) if fitting else min(runs, key=lambda r: r.k)
        carried = rate * ROUND_SECONDS / best.gas_per_node_round
        label = str(best.k) if fitting else f"none (k = {best.k} needs more)"
        print(f"| {rate / 1e6:,.1f} Mgas/s | {label} | {carried:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds published and judged")
    parser.add_argument(
        "--committee", type=int, action="append", help="committee size k (repeat; 16 32 64)"
    )
    parser.add_argument("--per-block", type=int, default=250, help="transactions per block")
    parser.add_argument(
        "--gas-per-second", type=float, action="append",
        help="chain gas rates to size k for (repeat; default 3.75e6 25e6 150e6)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.peers < 2 or args.rounds < 1:
        parser.error("at least 2 peers and 1 round")
    sizes = args.committee or [16, 32, 64]
    rates = args.gas_per_second or [3.75e6, 25e6, 150e6]
    runs = []
    with tempfile.TemporaryDirectory(prefix="scale-swarm-") as tmp:
        for k in sizes:
            log(f"k = {k}: {args.peers:,} peers, {args.rounds} rounds")
            started = time.perf_counter()
            work = Path(tmp) / f"k{k}"
            work.mkdir()
            runs.append(run_swarm(args.peers, args.rounds, k, args.per_block, work))
            log(f"  done in {time.perf_counter() - started:.0f} s")
    report(runs, rates, SamplingSettings().fetch_peers)


if __name__ == "__main__":
    main()
