"""Small helpers shared by the chain tests."""

from __future__ import annotations

import hashlib
import http.server
import json
import random
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import requests
from eth_account import Account
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.committee import ballot_commitment, new_salt, sort_items
from node.chain.models import TxReceipt, VerdictItem
from node.local.devchain import DevChain

ETHER = 10**18


def digest_of(label: str) -> bytes:
    """A stand-in batch digest: SHA-256 of a label."""
    return hashlib.sha256(label.encode()).digest()


def register_all(
    client_for: Callable[..., CoordinatorClient],
    accounts: Sequence[LocalAccount],
    stake: int = ETHER,
) -> list[CoordinatorClient]:
    """Registers each account as a peer named peer-<i>; returns their clients."""
    clients = []
    for index, account in enumerate(accounts):
        client = client_for(account)
        client.register(f"peer-{index}", stake)
        clients.append(client)
    return clients


def publish(client: CoordinatorClient, round: int, label: str = "batch") -> bytes:
    """Publishes a stand-in batch of ``round``; returns its digest."""
    digest = digest_of(f"{label}-{client.account_address}-{round}")
    client.publish_rollouts(round, digest, groups=4, completions=32, reward_sum=12_345)
    return digest


def item_on(subject: CoordinatorClient | str, *, flag: bool) -> VerdictItem:
    """A verdict on ``subject``'s batch: a flag (7 of 8 agreed) or an agreement (8 of 8)."""
    address = subject if isinstance(subject, str) else subject.account_address
    assert address is not None
    return VerdictItem(
        subject=address, checked=8, agreed=7 if flag else 8, verified_reward_sum=1_000
    )


class Ballot:
    """One attester's verdicts on one round: commit them, later reveal them (items sorted)."""

    def __init__(self, client: CoordinatorClient, round: int, items: Sequence[VerdictItem]) -> None:
        self.client = client
        self.round = round
        self.items = sort_items(items)
        self.salt = new_salt()

    @property
    def commitment(self) -> bytes:
        assert self.client.account_address is not None
        return ballot_commitment(self.client.account_address, self.round, self.items, self.salt)

    def commit(self) -> TxReceipt:
        return self.client.commit_verdicts(self.round, self.commitment)

    def reveal(self) -> TxReceipt:
        return self.client.reveal_verdicts(self.round, self.items, self.salt)


def to_commit_phase(chain: DevChain, client: CoordinatorClient, round: int) -> None:
    """Warps to the first round of ``round``'s commit phase (if not there yet)."""
    target = client.cached_phases.commit_phase(round).start
    if chain.current_round() < target:
        chain.warp_to_round(target)


def to_reveal_phase(chain: DevChain, client: CoordinatorClient, round: int) -> None:
    target = client.cached_phases.reveal_phase(round).start
    if chain.current_round() < target:
        chain.warp_to_round(target)


def to_settle_phase(chain: DevChain, client: CoordinatorClient, round: int) -> None:
    target = client.cached_phases.settleable_from(round)
    if chain.current_round() < target:
        chain.warp_to_round(target)


def judge(chain: DevChain, round: int, ballots: Sequence[Ballot], *, seal: bool = True) -> None:
    """Seals ``round`` (unless ``seal=False``), commits every ballot, then reveals them all;
    leaves the chain in the reveal phase."""
    first = ballots[0].client
    to_commit_phase(chain, first, round)
    if seal:
        first.seal_round(round)
    for ballot in ballots:
        ballot.commit()
    to_reveal_phase(chain, first, round)
    for ballot in ballots:
        ballot.reveal()


class FlakyProxy:
    """An HTTP proxy in front of a real RPC that fails chosen requests in chosen ways.

    ``plan`` maps a JSON-RPC method (or ``"*"`` for any) to the failures of its next requests, used
    up one per request: an HTTP status (503, 429) is answered as such; ``"drop"`` closes the
    connection unanswered; ``"lost"`` forwards the request, then closes without passing the answer
    on (the node acted, the client never heard). Requests without a planned failure are forwarded.
    """

    def __init__(self, target_url: str, plan: dict[str, list[int | str]] | None = None) -> None:
        self.target_url = target_url
        self.plan = {method: list(failures) for method, failures in (plan or {}).items()}
        self.seen: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                failure = proxy._next_failure(json.loads(body).get("method", ""))
                if failure in ("drop", "lost"):
                    if failure == "lost":
                        proxy._forward(body)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if failure is not None:
                    self.send_response(int(failure))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                upstream = proxy._forward(body)
                self.send_response(upstream.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(upstream.content)))
                self.end_headers()
                self.wfile.write(upstream.content)

            def log_message(self, *args: object) -> None:
                return

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _next_failure(self, method: str) -> int | str | None:
        with self._lock:
            self.seen.append(method)
            for key in (method, "*"):
                if self.plan.get(key):
                    return self.plan[key].pop(0)
        return None

    def _forward(self, body: bytes) -> requests.Response:
        return requests.post(
            self.target_url, data=body, headers={"Content-Type": "application/json"}, timeout=10
        )

    @contextmanager
    def running(self) -> Iterator[FlakyProxy]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


def random_peers(chain, client_for, rng: random.Random, count: int):  # type: ignore[no-untyped-def]
    """``count`` fresh funded accounts registered with random stakes (1 to 6 ETH, odd wei)."""
    clients = []
    for index in range(count):
        account = Account.from_key(rng.randbytes(32))
        chain.fund(account.address, 100 * ETHER)
        client = client_for(account)
        client.register(f"p{index}", ETHER + rng.randrange(5 * ETHER))
        clients.append(client)
    return clients
