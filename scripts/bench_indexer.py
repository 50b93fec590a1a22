#!/usr/bin/env python
"""Benchmark of the coordinator indexer on a generated swarm (real transactions on Anvil).

    .venv/bin/python scripts/bench_indexer.py                  # 1,000 peers, 20 rounds
    .venv/bin/python scripts/bench_indexer.py --peers 100 --rounds 5   # a quick look

What it does:

1. Starts its own Anvil (own port, huge block gas limit, automine off), deploys the coordinator,
   and plays a swarm: N peers register, then each round every peer publishes a batch, attests
   the previous round's batches of its next ``--attest`` peers in one transaction (every 50th
   peer's claims are flagged by its attesters), and the flagged rounds are settled (slashing)
   once their window closed. Peers are impersonated (``anvil_autoImpersonateAccount``) and
   funded with ``anvil_setBalance``: real transactions, executed by the real contract, without
   signing 40,000 of them in Python. Transactions are sent in JSON-RPC batches and mined
   ``--per-block`` at a time.
2. Ingestion: the same block range read twice: the **baseline** is ``EventReader.read`` alone
   (eth_getLogs + decoding, no database); then a fresh indexer syncs it into SQLite. Reported:
   events/s of each and their ratio (what the database, reorg bookkeeping and derived rows cost).
3. API latency under a bounded local load: ``--clients`` threads each send ``--requests``
   requests over keep-alive connections to ``/api/leaderboard`` (random sort and page, 50
   rows), then the same load on ``/health`` (one-row read: the server's own floor) as the
   baseline. Reported: p50/p95 and requests/s of each, and the ratios.

All traffic goes to 127.0.0.1 only and every loop is bounded. Timings depend on the machine and
its load; the README quotes one run and the machine it ran on.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests
from eth_account import Account
from web3 import Web3

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from coordinator_indexer.ingest import Indexer, IngestSettings  # noqa: E402
from coordinator_indexer.store import Store  # noqa: E402
from node.chain.abi import load_abi  # noqa: E402
from node.chain.deployer import DeployConfig, deploy_coordinator  # noqa: E402
from node.chain.events import EventReader  # noqa: E402
from node.chain.rpc import connect  # noqa: E402
from node.local.anvil import DEV_KEYS, start_anvil  # noqa: E402

ETHER = 10**18
ROUND = 3600  # long rounds: a round's blocks never spill into the next one


def log(message: str) -> None:
    print(message, flush=True)


# ------------------------------------------------------------------------------- the swarm


class Swarm:
    """Sends the generated swarm's transactions to Anvil in JSON-RPC batches."""

    def __init__(self, url: str, w3: Web3, coordinator: str, per_block: int) -> None:
        self.url = url
        self.w3 = w3
        self.contract = w3.eth.contract(address=coordinator, abi=load_abi())
        self.coordinator = coordinator
        self.per_block = per_block
        self.session = requests.Session()
        self.sent = 0

    def rpc_batch(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
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
        """Sends ``txs`` (from impersonated peers) and mines them, ``per_block`` per block."""
        for start in range(0, len(txs), self.per_block):
            chunk = txs[start : start + self.per_block]
            hashes = self.rpc_batch([("eth_sendTransaction", [tx]) for tx in chunk])
            self.rpc("evm_mine")
            receipts = self.rpc_batch([("eth_getTransactionReceipt", [h]) for h in hashes])
            failed = [r for r in receipts if r is None or int(r["status"], 16) != 1]
            if failed:
                raise RuntimeError(f"{len(failed)} transaction(s) failed or were not mined")
            self.sent += len(chunk)

    def tx(self, sender: str, function: str, args: list[Any], gas: int, value: int = 0) -> dict:
        return {
            "from": sender,
            "to": self.coordinator,
            "data": self.contract.encode_abi(function, args=args),
            "gas": hex(gas),
            "value": hex(value),
        }


def peer_addresses(count: int) -> list[str]:
    return [
        Web3.to_checksum_address(hashlib.sha256(f"bench-peer-{i}".encode()).digest()[:20])
        for i in range(count)
    ]


def digest_of(peer: str, round_: int) -> bytes:
    return hashlib.sha256(f"{peer}-{round_}".encode()).digest()


def claim(i: int, round_: int) -> int:
    return 2000 + (i * 37 + round_ * 11) % 6000  # milli-units


def play_swarm(swarm: Swarm, genesis: int, peers: list[str], rounds: int, attest: int) -> None:
    n = len(peers)
    swarm.rpc("anvil_autoImpersonateAccount", True)
    swarm.rpc_batch([("anvil_setBalance", [p, hex(1000 * ETHER)]) for p in peers])
    swarm.rpc("evm_setAutomine", False)
    swarm.send(
        [swarm.tx(p, "register", [f"peer-{i:04d}"], 200_000, ETHER) for i, p in enumerate(peers)]
    )
    log(f"  registered {n} peers")
    flagged = {i for i in range(n) if i % 50 == 0}
    settler = peer_addresses(n + 1)[-1]
    swarm.rpc("anvil_setBalance", settler, hex(1000 * ETHER))
    settler_nonce = 0
    for round_ in range(rounds + 1):
        swarm.rpc("evm_setNextBlockTimestamp", genesis + round_ * ROUND + 1)
        txs = []
        if round_ < rounds:
            txs += [
                swarm.tx(p, "publishRollouts", [round_, digest_of(p, round_), 8, 64, claim(i, round_)], 150_000)
                for i, p in enumerate(peers)
            ]  # fmt: skip
        if round_ >= 1:
            txs += [
                swarm.tx(p, "attest", [_verdicts(peers, i, round_ - 1, attest, flagged)], 120_000 + 40_000 * attest)
                for i, p in enumerate(peers)
            ]  # fmt: skip
        if round_ >= 3:  # one settler (any account may settle), its nonces counted here
            for i in sorted(flagged):
                tx = swarm.tx(settler, "settle", [round_ - 3, peers[i]], 200_000)
                txs.append({**tx, "nonce": hex(settler_nonce)})
                settler_nonce += 1
        swarm.send(txs)
        log(f"  round {round_}: {len(txs)} transactions ({swarm.sent:,} in all)")


def _verdicts(peers: list[str], i: int, round_: int, attest: int, flagged: set[int]) -> list:
    n = len(peers)
    items = []
    for k in range(1, attest + 1):
        j = (i + k) % n
        bad = j in flagged
        verified = claim(j, round_) // 4 if bad else claim(j, round_) - (i % 3) * 10
        items.append((round_, peers[j], digest_of(peers[j], round_), 8, 5 if bad else 8, verified))
    return sorted(items, key=lambda item: (item[0], int(item[1], 16)))


# ------------------------------------------------------------------------------- measuring


def measure_ingestion(w3: Web3, deployment: Any, db_url: str) -> dict[str, float]:
    head = w3.eth.block_number
    started = time.perf_counter()
    events = EventReader(w3, deployment.coordinator, max_chunk=2_000).read(
        deployment.deployment_block, head
    )
    baseline_s = time.perf_counter() - started
    store = Store.open(db_url)
    indexer = Indexer(w3, deployment, store, IngestSettings(confirmations=12, max_range=2_000))
    indexer.prepare()
    started = time.perf_counter()
    result = indexer.sync()
    indexer_s = time.perf_counter() - started
    counts = store.counts()
    store.close()
    assert result.cursor == head
    return {
        "events": len(events),
        "blocks": head - deployment.deployment_block + 1,
        "baseline_s": baseline_s,
        "indexer_s": indexer_s,
        "peers": counts["peers"],
        "attestations": counts["attestations"],
    }


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
    sorts = ["rank", "verified", "claimed", "rounds", "stake", "slashes", "name"]
    pages = range(0, max(1, peers), 50)
    return [f"api/leaderboard?limit=50&offset={o}&sort={s}" for s in sorts for o in pages]


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


def serve(rpc_url: str, work: Path) -> Server:
    ready = work / "ready"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "coordinator_indexer", "run", "--rpc", rpc_url,
            "--deployment", str(work / "deployment.json"), "--db", f"sqlite:///{work / 'bench.db'}",
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


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--attest", type=int, default=3, help="subjects each peer attests")
    parser.add_argument("--per-block", type=int, default=250, help="transactions per block")
    parser.add_argument("--clients", type=int, default=8, help="concurrent API clients")
    parser.add_argument("--requests", type=int, default=250, help="requests per client")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-indexer-") as tmp:
        work = Path(tmp)
        anvil = start_anvil(
            work / "anvil.log",
            extra_args=("--gas-limit", "2000000000", "--silent", "--no-request-size-limit"),
        )
        try:
            w3 = connect(anvil.url, timeout=300)
            deployment = deploy_coordinator(
                w3,
                Account.from_key(DEV_KEYS[0]),
                DeployConfig(round_duration=ROUND, min_stake=ETHER // 10, dispute_quorum=2),
                out=work / "deployment.json",
            )
            log(f"swarm: {args.peers} peers, {args.rounds} rounds, {args.attest} attestations each")
            started = time.perf_counter()
            swarm = Swarm(anvil.url, w3, deployment.coordinator, args.per_block)
            play_swarm(
                swarm, deployment.genesis, peer_addresses(args.peers), args.rounds, args.attest
            )
            log(f"  {swarm.sent:,} transactions in {time.perf_counter() - started:.0f} s")

            log("ingestion (same block range, fresh SQLite database)")
            ingest = measure_ingestion(w3, deployment, f"sqlite:///{work / 'bench.db'}")
            base_rate = ingest["events"] / ingest["baseline_s"]
            rate = ingest["events"] / ingest["indexer_s"]

            log("API load (bounded: clients x requests, 127.0.0.1 only)")
            server = serve(anvil.url, work)
            try:
                board = load(server.url, leaderboard_paths(args.peers), args.clients, args.requests)
                health = load(server.url, ["health"], args.clients, args.requests)
            finally:
                server.stop()
        finally:
            anvil.stop()

    print()
    print("| measure | result | baseline | ratio |")
    print("| --- | ---: | ---: | ---: |")
    print(
        f"| ingestion, events/s ({ingest['events']:,} events, {ingest['blocks']:,} blocks) "
        f"| {rate:,.0f} | {base_rate:,.0f} (eth_getLogs + decode, no DB) "
        f"| {rate / base_rate:.2f} |"
    )
    print(
        f"| ingestion, seconds | {ingest['indexer_s']:.1f} | {ingest['baseline_s']:.1f} "
        f"| {ingest['indexer_s'] / ingest['baseline_s']:.2f} |"
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
