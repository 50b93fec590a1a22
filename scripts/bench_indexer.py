#!/usr/bin/env python
"""Benchmark of the coordinator indexer on a generated v3 swarm (real transactions on Anvil).

    .venv/bin/python scripts/bench_indexer.py                  # 1,000 peers, 20 rounds
    .venv/bin/python scripts/bench_indexer.py --peers 100 --rounds 5   # a quick look
    .venv/bin/python scripts/bench_indexer.py --profile sync.prof      # where ingestion goes

What it does:

1. Starts its own Anvil (own port, huge block gas limit, automine off), deploys the coordinator
   (protocol v2: phases g=1, c=2, v=2 as ``swarm-deploy``; committee size ``--committee``, 3 by
   default, so each peer judges about 3 batches a round) and plays a swarm: N peers register in
   round 0; for rounds 1..R every peer publishes a batch; in r's commit phase (round r+2) one
   account seals r and every peer with a seat commits its verdicts on the batches it is seated
   for (seats computed from the seal and ``weightAt`` with ``node.chain.committee.RoundSeats``),
   reveals them in r's reveal phase (r+4), and after it (r+6) the flagged batches are settled
   and their flags resolved. Every 50th peer's batches are flagged by its committee (and upheld:
   slashed). The chain's clock jumps to each round's start (``evm_setNextBlockTimestamp``).
   Peers are impersonated (``anvil_autoImpersonateAccount``) and funded with ``anvil_setBalance``:
   real transactions, executed by the real contract, without signing 60,000 of them in Python.
   Transactions are sent in JSON-RPC batches and mined ``--per-block`` at a time.
2. Ingestion: the same block range read five times: the **baseline** is ``EventReader.read``
   alone (eth_getLogs + decoding, no database); then a fresh indexer syncs it into SQLite four
   ways (``MODES``): reading in line (``read_ahead=0``), which takes this short chain in one
   range and one transaction; reading in line in ranges of about ``max_events`` logs, as it
   would on a chain too long for one range; and reading ahead in its reader processes, one per
   core (``read_ahead=1``; ``coordinator_indexer.readahead``), timed from the start as the others
   and timed from when the readers have started (their imports are a one-time cost that this
   short chain makes large: the steady state of a long catch-up). The indexer also reads
   ``rulesAt`` and every peer's ``weightAt`` at each seal's block, for committee duties.
   Reported: events/s of each and their ratio to the baseline (what the database, the seal
   reads, reorg bookkeeping and derived rows cost), the fastest of ``--repeats`` measurements of
   each, and the wall time of each of the indexer's phases against the baseline.
3. API latency under a bounded local load: ``--clients`` threads each send ``--requests``
   requests over keep-alive connections to ``/api/leaderboard`` (random sort, order and page,
   50 rows), then the same load on ``/health`` (one-row read: the server's own floor) as the
   baseline. Reported: p50/p95 and requests/s of each, and the ratios.

All traffic goes to 127.0.0.1 only and every loop is bounded. Timings depend on the machine and
its load; docs/BENCHMARKS.md quotes one run and the machine it ran on.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import hashlib
import pstats
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from eth_account import Account
from web3 import Web3

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from coordinator_indexer.ingest import Indexer, IngestSettings
from coordinator_indexer.readahead import ReadAhead
from coordinator_indexer.store import Store
from node.chain.abi import load_abi
from node.chain.client import CoordinatorClient
from node.chain.committee import RoundSeats, ballot_commitment, sort_items
from node.chain.deployer import DeployConfig, deploy_coordinator
from node.chain.events import EventReader
from node.chain.models import VerdictItem, VerdictState
from node.chain.rpc import connect
from node.local.anvil import DEV_KEYS, start_anvil

ETHER = 10**18
ROUND = 3600  # long rounds: a round's blocks never spill into the next one
FLAG_EVERY = 50  # every 50th peer's batches are flagged by its committee


def log(message: str) -> None:
    print(message, flush=True)


# ------------------------------------------------------------------------------- the swarm


class Swarm:
    """Sends the generated swarm's transactions to Anvil in JSON-RPC batches."""

    def __init__(self, url: str, w3: Web3, coordinator: str, per_block: int) -> None:
        self.url = url
        self.w3 = w3
        self.contract = w3.eth.contract(address=coordinator, abi=load_abi())
        self.client = CoordinatorClient(w3, coordinator)  # reads only
        self.coordinator = coordinator
        self.per_block = per_block
        self.session = requests.Session()
        self.nonces: Counter[str] = Counter()  # every sender is fresh: nonces counted here
        self.sent = 0
        self.by_function: Counter[str] = Counter()
        self.gas_by_function: Counter[str] = Counter()  # gas used, from the receipts
        self._function_of: dict[tuple[str, int], str] = {}

    def rpc_batch(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        if not calls:
            return []
        payload = [
            {"jsonrpc": "2.0", "id": i, "method": method, "params": params}
            for i, (method, params) in enumerate(calls)
        ]
        answers = self.session.post(self.url, json=payload, timeout=300).json()
        errors = [a["error"] for a in answers if "error" in a]
        if errors:
            raise RuntimeError(f"{len(errors)} call(s) failed, first: {errors[0]}")
        return [a.get("result") for a in sorted(answers, key=lambda a: a["id"])]

    def rpc(self, method: str, *params: Any) -> Any:
        return self.rpc_batch([(method, list(params))])[0]

    def send(self, txs: list[dict[str, Any]]) -> None:
        """Sends ``txs`` (from impersonated accounts) and mines them, ``per_block`` per block."""
        for start in range(0, len(txs), self.per_block):
            chunk = txs[start : start + self.per_block]
            hashes = self.rpc_batch([("eth_sendTransaction", [tx]) for tx in chunk])
            self.rpc("evm_mine")
            receipts = self.rpc_batch([("eth_getTransactionReceipt", [h]) for h in hashes])
            failed = [r for r in receipts if r is None or int(r["status"], 16) != 1]
            if failed:
                raise RuntimeError(f"{len(failed)} transaction(s) failed or were not mined")
            for tx, receipt in zip(chunk, receipts, strict=True):
                function = self._function_of.pop((tx["from"], int(tx["nonce"], 16)))
                self.gas_by_function[function] += int(receipt["gasUsed"], 16)
            self.sent += len(chunk)

    def tx(self, sender: str, function: str, args: list[Any], gas: int, value: int = 0) -> dict:
        nonce = self.nonces[sender]
        self.nonces[sender] += 1
        self.by_function[function] += 1
        self._function_of[(sender, nonce)] = function
        return {
            "from": sender,
            "to": self.coordinator,
            "data": self.contract.encode_abi(function, args=args),
            "gas": hex(gas),
            "value": hex(value),
            "nonce": hex(nonce),
        }

    def weights_at(self, peers: list[str], round_: int) -> dict[str, int]:
        """Every peer's ``weightAt(peer, round_)``, in one JSON-RPC batch of eth_calls."""
        calls = [
            ("eth_call", [{"to": self.coordinator, "data": self.contract.encode_abi(
                "weightAt", args=[peer, round_])}, "latest"])
            for peer in peers
        ]  # fmt: skip
        answers = self.rpc_batch(calls)
        return {peer: int(answer, 16) for peer, answer in zip(peers, answers, strict=True)}


def peer_addresses(count: int) -> list[str]:
    return [
        Web3.to_checksum_address(hashlib.sha256(f"bench-peer-{i}".encode()).digest()[:20])
        for i in range(count)
    ]


def digest_of(peer: str, round_: int) -> bytes:
    return hashlib.sha256(f"{peer}-{round_}".encode()).digest()


def claim(i: int, round_: int) -> int:
    return 2000 + (i * 37 + round_ * 11) % 6000  # milli-units


def salt_of(peer: str, round_: int) -> bytes:
    return hashlib.sha256(f"salt-{peer}-{round_}".encode()).digest()


def seats(
    beacon: bytes, total: int, k: int, subjects: list[str], weights: dict[str, int]
) -> dict[str, list[str]]:
    """Each attester's seats (subjects, ascending) on the sealed round's committees, by the seat
    rule (``committee.RoundSeats``: one hash per peer and a sort)."""
    ring = RoundSeats(beacon, total, k, subjects)
    out: dict[str, list[str]] = {}
    for attester, weight in weights.items():
        mine = ring.of(attester, weight)
        if mine:
            out[attester] = sorted(mine, key=lambda s: int(s, 16))
    return out


@dataclass
class Ballot:
    items: list[VerdictItem]
    salt: bytes


@dataclass
class Tally:
    seats: int = 0
    committed: int = 0
    flags: int = 0
    upheld: int = 0
    rejected: int = 0
    unflagged: int = 0  # flagged peers whose batch no committee member flagged (no seat)
    ballots: dict[int, dict[str, Ballot]] = field(default_factory=dict)
    flaggers: dict[tuple[int, str], list[str]] = field(default_factory=dict)


def play_swarm(
    swarm: Swarm,
    deployment: Any,
    peers: list[str],
    rounds: int,
    k: int,
    after_round: Callable[[int], None] | None = None,
) -> Tally:
    """Register in round 0, publish rounds 1..rounds, judge each through its phases;
    ``after_round(now)`` runs once each round's blocks are mined."""
    n = len(peers)
    phases = deployment.phases
    g, c = phases.grace_rounds, phases.commit_rounds
    judging = g + c + phases.reveal_rounds  # J
    index = {p: i for i, p in enumerate(peers)}
    flagged = [peers[i] for i in range(n) if i % FLAG_EVERY == 0]
    tally = Tally()
    swarm.rpc("anvil_autoImpersonateAccount", True)
    settler = peer_addresses(n + 1)[-1]  # any account may seal and settle; not a peer
    swarm.rpc_batch([("anvil_setBalance", [p, hex(1000 * ETHER)]) for p in [*peers, settler]])
    swarm.rpc("evm_setAutomine", False)
    swarm.send(
        [swarm.tx(p, "register", [f"peer-{i:04d}"], 200_000, ETHER) for i, p in enumerate(peers)]
    )
    log(f"  round 0: registered {n} peers")
    for now in range(1, rounds + judging + 2):
        swarm.rpc("evm_setNextBlockTimestamp", deployment.genesis + now * ROUND + 1)
        txs: list[dict[str, Any]] = []
        # rounds r+g+1: seal r (two calls, each alone in its block: the first fixes the beacon
        # block, the second draws from its hash), then commit
        sealed = now - g - 1
        if 1 <= sealed <= rounds:
            for _ in range(2):
                swarm.send([swarm.tx(settler, "sealRound", [sealed], 200_000)])
            txs += _commits(swarm, tally, peers, index, flagged, sealed, k)
        if 1 <= now <= rounds:
            txs += [
                swarm.tx(p, "publishRollouts", [now, digest_of(p, now), 8, 64, claim(i, now)], 150_000)
                for i, p in enumerate(peers)
            ]  # fmt: skip
        revealed = now - g - c - 1  # rounds r+g+c+1: reveal r
        for attester, ballot in tally.ballots.pop(revealed, {}).items():
            args = [revealed, [item.to_abi() for item in ballot.items], ballot.salt]
            txs.append(
                swarm.tx(attester, "revealVerdicts", args, 120_000 + 90_000 * len(ballot.items))
            )
        settling, settled = now - judging - 1, []  # rounds r+J+1: settle r, resolve its flags
        if 1 <= settling <= rounds:
            more, settled = _settlements(swarm, tally, flagged, settling, settler)
            txs += more
        swarm.send(txs)
        for subject in settled:
            state = swarm.client.verdict(settling, subject).state
            tally.upheld += state == VerdictState.UPHELD
            tally.rejected += state == VerdictState.REJECTED
        log(
            f"  round {now}: {len(txs) + 2 * (1 <= sealed <= rounds)} transactions "
            f"({swarm.sent:,} in all)"
        )
        if after_round is not None:
            after_round(now)
    return tally


def _commits(
    swarm: Swarm,
    tally: Tally,
    peers: list[str],
    index: dict[str, int],
    flagged: list[str],
    round_: int,
    k: int,
) -> list[dict[str, Any]]:
    seal = swarm.client.seal(round_)
    assert seal is not None, f"round {round_} not sealed"
    assert swarm.client.rules_at(round_).committee_size == k
    weights = swarm.weights_at(peers, round_)
    drawn = seats(seal.beacon, seal.total_weight, k, peers, weights)
    ballots: dict[str, Ballot] = {}
    txs = []
    for attester, subjects in drawn.items():
        i = index[attester]
        items = []
        for subject in subjects:
            j, bad = index[subject], subject in flagged
            verified = claim(j, round_) // 4 if bad else claim(j, round_) - (i % 3) * 10
            items.append(
                VerdictItem(subject=subject, checked=8, agreed=5 if bad else 8,
                            verified_reward_sum=verified)
            )  # fmt: skip
        items = sort_items(items)
        salt = salt_of(attester, round_)
        ballots[attester] = Ballot(items, salt)
        commitment = ballot_commitment(attester, round_, items, salt)
        deposit = swarm.client.cached_commit_deposit
        txs.append(swarm.tx(attester, "commitVerdicts", [round_, commitment], 150_000, deposit))
        tally.seats += len(items)
        for item in items:
            if item.is_flag:
                tally.flags += 1
                tally.flaggers.setdefault((round_, item.subject), []).append(attester)
    tally.committed += len(ballots)
    tally.ballots[round_] = ballots
    return txs


def _settlements(
    swarm: Swarm, tally: Tally, flagged: list[str], round_: int, settler: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Settles every flagged batch of ``round_`` that holds a counted flag, then resolves each
    flag (the settler sends both, in nonce order, so each resolve follows its settle)."""
    txs, settled = [], []
    for subject in flagged:
        if swarm.client.verdict(round_, subject).flaggers == 0:
            tally.unflagged += 1  # no seat on its committee, or every flagger's seat was lost
            continue
        settled.append(subject)
        txs.append(swarm.tx(settler, "settle", [round_, subject], 300_000))
        for flagger in tally.flaggers.pop((round_, subject), []):
            if swarm.client.flag_weight(round_, subject, flagger) > 0:
                txs.append(swarm.tx(settler, "resolveFlag", [round_, subject, flagger], 200_000))
    return txs, settled


# ------------------------------------------------------------------------------- measuring


#: Each indexer measured: its IngestSettings.read_ahead, whether its ranges are cut to about
#: ``max_events`` logs as a long catch-up cuts them (else ``max_range``, 2,000 blocks, takes the
#: benchmark's whole chain in one range: one transaction, the database's cheapest case), and
#: whether the clock starts once the reader processes have started (their imports, about half a
#: second once, are a third of this short chain's read; on a long catch-up they are nothing).
MODES = {
    "in line": (0, False, False),
    "in line, long-chain ranges": (0, True, False),
    "read ahead": (1, False, False),
    "read ahead, readers started": (1, False, True),
}


def measure_ingestion(
    w3: Web3, deployment: Any, work: Path, attempt: int, profile: Path | None = None
) -> dict[str, Any]:
    """The baseline read once, then a fresh indexer per mode (``MODES``) syncing the same range
    into a SQLite database of its own."""
    head = w3.eth.block_number
    started = time.perf_counter()
    events = EventReader(w3, deployment.coordinator, max_chunk=2_000).read(
        deployment.deployment_block, head
    )
    baseline_s = time.perf_counter() - started
    kinds = Counter(type(event).__name__ for event in events)
    log(
        f"  baseline: {len(events):,} events in {head - deployment.deployment_block + 1:,} blocks"
        f" read in {baseline_s:.1f} s ({len(events) / baseline_s:,.0f}/s): {dict(kinds.most_common())}"
    )
    run: dict[str, Any] = {
        "events": len(events),
        "blocks": head - deployment.deployment_block + 1,
        "baseline_s": baseline_s,
    }
    for number, (mode, (read_ahead, long_chain, from_readers)) in enumerate(MODES.items()):
        db_url = f"sqlite:///{work / f'bench-{attempt}-{number}.db'}"
        settings = IngestSettings(
            confirmations=12,
            max_range=long_chain_range(run) if long_chain else 2_000,
            read_ahead=read_ahead,
        )
        store = Store.open(db_url)
        with Indexer(w3, deployment, store, settings) as indexer:
            indexer.prepare()
            if from_readers:
                indexer.wait_for_readers()
            with time_phases(indexer) as phases:
                profiler = cProfile.Profile() if profile else None
                started = time.perf_counter()
                with profiler or contextlib.nullcontext():
                    result = indexer.sync()
                run[mode] = time.perf_counter() - started
        shares = ", ".join(
            f"{name} {seconds:.2f} s ({seconds / baseline_s:.0%} of the baseline)"
            for name, seconds in phases.items()
        )
        log(f"  {mode}: {run[mode]:.2f} s; its phases: {shares}")
        if profiler is not None and profile is not None:
            profiler.dump_stats(profile.with_suffix(f".{number}{profile.suffix}"))
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(30)
        counts = store.counts()
        store.close()
        assert result.cursor == head
        assert counts["votes"] == kinds["VerdictRevealed"] + kinds["VerdictIgnored"], counts
        run["rows"] = {name: counts[name] for name in ("peers", "publications", "votes", "duties")}
        run["db"] = db_url
    return run


def long_chain_range(run: dict[str, Any]) -> int:
    """Blocks per range that hold about ``max_events`` logs here: the size reading in line
    settles to on a chain too long for one range (``fetch.next_range_size``)."""
    per_block = run["events"] / run["blocks"]
    return max(1, round(IngestSettings().max_events / per_block))


def best_ingestion(
    w3: Web3, deployment: Any, work: Path, repeats: int, profile: Path | None
) -> dict[str, Any]:
    """``measure_ingestion`` ``repeats`` times (the last run's read-ahead database is what the API
    load serves): the fastest baseline and the fastest indexer of each mode, on shared cores the
    least disturbed of each."""
    runs = [measure_ingestion(w3, deployment, work, attempt, profile) for attempt in range(repeats)]
    best = dict(runs[-1])
    for key in ("baseline_s", *MODES):
        best[key] = min(run[key] for run in runs)
    return best


@contextmanager
def time_phases(indexer: Indexer) -> Iterator[dict[str, float]]:
    """Wraps the indexer's phases so that each adds its wall time to the yielded dict: where
    ingestion goes beyond the baseline's read, without a profiler's distortion. Reading ahead,
    the read runs in the reader processes: the parent's share of it is its wait."""
    phases: dict[str, float] = {}
    undo: list[Callable[[], None]] = []

    def timed(owner: Any, method: str, name: str) -> None:
        original = getattr(owner, method)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - started

        setattr(owner, method, wrapper)
        undo.append(lambda: setattr(owner, method, original))

    timed(indexer.reader, "read_range", "logs read and decoded")
    timed(indexer.chain, "block", "block headers")
    timed(indexer.chain, "seal_reads", "seal reads (weightAt)")
    timed(ReadAhead, "take", "waiting for the readers")
    timed(indexer.store, "apply_range", "database (rows and derived tables)")
    try:
        yield phases
    finally:
        for restore in reversed(undo):
            restore()


def load(url: str, paths: list[str], clients: int, per_client: int) -> dict[str, float]:
    latencies: list[float] = []
    lock = threading.Lock()

    def client(seed: int) -> None:
        rng = random.Random(seed)
        session = requests.Session()
        mine = []
        for _ in range(per_client):
            path = rng.choice(paths)
            started = time.perf_counter()
            response = session.get(url + path, timeout=30)
            mine.append(time.perf_counter() - started)
            response.raise_for_status()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    quantiles = statistics.quantiles(latencies, n=100)
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * quantiles[94],
        "rps": len(latencies) / wall,
        "requests": len(latencies),
    }


def leaderboard_paths(peers: int) -> list[str]:
    """Every sort, both orders, every page of 50."""
    sorts = ["rank", "verified", "claimed", "rounds", "stake", "slashes", "name"]
    sorts += ["duty_done", "duty_missed"]
    pages = range(0, max(1, peers), 50)
    return [
        f"api/leaderboard?limit=50&offset={o}&sort={s}&order={order}"
        for s in sorts
        for order in ("asc", "desc")
        for o in pages
    ]


class Server:
    """``swarm-indexer run`` in its own process (the load's client threads stay out of its GIL)."""

    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process, self.url = process, url

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def serve(rpc_url: str, work: Path, db_url: str) -> Server:
    ready = work / "ready"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "coordinator_indexer", "run", "--rpc", rpc_url,
            "--deployment", str(work / "deployment.json"), "--db", db_url,
            "--port", "0", "--ready-file", str(ready),
        ],
        stdout=subprocess.DEVNULL,
        cwd=REPO,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (ready.exists() and ready.read_text().strip()):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("swarm-indexer run did not start")
        time.sleep(0.1)
    url = ready.read_text().strip()
    while requests.get(url + "health", timeout=10).json()["status"] != "ok":
        time.sleep(0.1)
    return Server(process, url)


@contextmanager
def bench_chain(
    work: Path, committee: int, gas_limit: int = 2_000_000_000
) -> Iterator[tuple[Any, Web3, Any]]:
    """An Anvil of its own (huge blocks, no request limit) with a coordinator of committee size
    ``committee`` deployed (``work/deployment.json``): (anvil, w3, deployment); stopped after."""
    anvil = start_anvil(
        work / "anvil.log",
        extra_args=("--gas-limit", str(gas_limit), "--silent", "--no-request-size-limit"),
    )
    try:
        w3 = connect(anvil.url, timeout=600)
        config = DeployConfig(round_duration=ROUND, min_stake=ETHER // 10, committee_size=committee)
        deployment = deploy_coordinator(
            w3, Account.from_key(DEV_KEYS[0]), config, out=work / "deployment.json"
        )
        yield anvil, w3, deployment
    finally:
        anvil.stop()


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--committee", type=int, default=3, help="committee size k (expected seats per batch)"
    )
    parser.add_argument("--per-block", type=int, default=250, help="transactions per block")
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="ingestion measured this many times (baseline, then indexer), the fastest of each "
        "reported",
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent API clients")
    parser.add_argument("--requests", type=int, default=250, help="requests per client")
    parser.add_argument(
        "--profile",
        type=Path,
        help="write a cProfile of the indexer's sync here and print its top 30 (slows the sync: "
        "its ratio to the baseline is then not the indexer's)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-indexer-") as tmp:
        work = Path(tmp)
        with bench_chain(work, args.committee) as (anvil, w3, deployment):
            log(
                f"swarm: {args.peers} peers, {args.rounds} rounds, committee size {args.committee}"
                f", phases {deployment.phases.model_dump()}"
            )
            started = time.perf_counter()
            swarm = Swarm(anvil.url, w3, deployment.coordinator, args.per_block)
            tally = play_swarm(
                swarm, deployment, peer_addresses(args.peers), args.rounds, args.committee
            )
            log(
                f"  {swarm.sent:,} transactions in {time.perf_counter() - started:.0f} s: "
                f"{dict(swarm.by_function.most_common())}"
            )
            log(
                f"  {tally.seats:,} seats, {tally.committed:,} ballots, {tally.flags} flags; "
                f"flagged batches settled: {tally.upheld} upheld, {tally.rejected} rejected, "
                f"{tally.unflagged} without a counted flag"
            )

            log(f"ingestion (same block range, fresh SQLite database; best of {args.repeats})")
            ingest = best_ingestion(w3, deployment, work, args.repeats, args.profile)
            log(f"  rows {ingest['rows']}")

            log("API load (bounded: clients x requests, 127.0.0.1 only)")
            server = serve(anvil.url, work, ingest["db"])
            try:
                board = load(server.url, leaderboard_paths(args.peers), args.clients, args.requests)
                health = load(server.url, ["health"], args.clients, args.requests)
            finally:
                server.stop()

    print()
    print("| measure | result | baseline | ratio |")
    print("| --- | ---: | ---: | ---: |")
    base_rate = ingest["events"] / ingest["baseline_s"]
    for mode in MODES:
        print(
            f"| ingestion {mode}, events/s ({ingest['events']:,} events, {ingest['blocks']:,} "
            f"blocks) | {ingest['events'] / ingest[mode]:,.0f} | {base_rate:,.0f} (eth_getLogs + "
            f"decode, no DB) | {ingest['baseline_s'] / ingest[mode]:.2f} |"
        )
        print(
            f"| ingestion {mode}, seconds | {ingest[mode]:.2f} | {ingest['baseline_s']:.2f} "
            f"| {ingest[mode] / ingest['baseline_s']:.2f} |"
        )
    for label, key in (("p50", "p50_ms"), ("p95", "p95_ms")):
        print(
            f"| /api/leaderboard {label}, ms ({args.clients} clients) | {board[key]:.1f} "
            f"| {health[key]:.1f} (/health) | {board[key] / health[key]:.2f} |"
        )
    print(
        f"| /api/leaderboard requests/s | {board['rps']:,.0f} | {health['rps']:,.0f} (/health) "
        f"| {board['rps'] / health['rps']:.2f} |"
    )


if __name__ == "__main__":
    main()
