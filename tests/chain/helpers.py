"""Small helpers shared by the chain tests."""

from __future__ import annotations

import hashlib
import http.server
import socketserver
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import requests
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.models import Attestation

ETHER = 10**18


def digest_of(label: str) -> bytes:
    """A stand-in batch digest: SHA-256 of a label."""
    return hashlib.sha256(label.encode()).digest()


def register_all(
    client_for: Callable[..., CoordinatorClient], accounts: Sequence[LocalAccount], stake: int = ETHER
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


def verdict_on(subject: CoordinatorClient, round: int, digest: bytes, *, flag: bool) -> Attestation:
    """An attestation of ``subject``'s batch: a flag (7 of 8 agreed) or an agreement (8 of 8)."""
    return Attestation(round=round, subject=subject.account_address, digest=digest, checked=8,
                       agreed=7 if flag else 8, verified_reward_sum=1_000)


class FlakyProxy:
    """An HTTP proxy in front of a real RPC that fails the first requests in chosen ways.

    ``failures`` is consumed one per request: an HTTP status (e.g. 503, 429) is answered as such,
    ``"drop"`` closes the connection without an answer; when it is empty, requests are forwarded.
    """

    def __init__(self, target_url: str, failures: Sequence[int | str] = ()) -> None:
        self.target_url = target_url
        self.failures = list(failures)
        self.requests_seen = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with proxy._lock:
                    proxy.requests_seen += 1
                    failure = proxy.failures.pop(0) if proxy.failures else None
                if failure == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if failure is not None:
                    self.send_response(int(failure))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                upstream = requests.post(proxy.target_url, data=body,
                                         headers={"Content-Type": "application/json"}, timeout=10)
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

    @contextmanager
    def running(self) -> Iterator[FlakyProxy]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
