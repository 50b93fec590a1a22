"""Starting and stopping a local Anvil chain (the dev chain of the demo and of the tests)."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from node.local.children import spawn
from node.local.foundry import FoundryMissing, foundry_binary
from node.local.ports import free_port

__all__ = ["CHAIN_ID", "DEV_KEYS", "AnvilError", "AnvilNode", "free_port", "start_anvil"]

CHAIN_ID = 31337
#: Anvil's published dev keys (mnemonic "test test ... junk"); never use them anywhere real.
DEV_KEYS = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
)


class AnvilError(RuntimeError):
    """Anvil is missing or did not start."""


@dataclass
class AnvilNode:
    """A running Anvil process."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    #: Block 0's hash, read once this Anvil was verified as the one answering on ``port``.
    genesis_hash: str = ""
    #: Where it keeps persisted states (removed by ``stop``); None: the caller chose the place.
    cache_dir: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.cache_dir is not None:
            shutil.rmtree(self.cache_dir, ignore_errors=True)


def anvil_binary() -> Path:
    """Path of the native anvil binary (node_modules, see node.local.foundry); AnvilError when
    it is not installed."""
    try:
        return foundry_binary("anvil")
    except FoundryMissing as exc:
        raise AnvilError(str(exc)) from exc


def start_anvil(
    log_path: Path,
    *,
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
    startup_timeout: float = 20.0,
) -> AnvilNode:
    """Starts Anvil (on a free port unless given), logging to ``log_path``; returns once the
    Anvil answering on the port is this one (``verify_anvil``)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    genesis, own_timestamp = _genesis_time(extra_args)
    # next to its log, not in ~/.foundry/anvil/tmp, which keeps each Anvil's states for good
    cache_dir = None if "--cache-path" in extra_args else log_path.with_suffix(".states")
    own_cache = ("--cache-path", str(cache_dir)) if cache_dir is not None else ()
    command = [
        str(anvil_binary()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chain-id",
        str(CHAIN_ID),
        "--accounts",
        str(len(DEV_KEYS)),
        "--balance",
        "10000",
        *own_timestamp,
        *own_cache,
        *extra_args,
    ]
    with log_path.open("wb") as log:
        process = spawn(command, stdout=log, stderr=subprocess.STDOUT)
    node = AnvilNode(process=process, port=port, log_path=log_path, cache_dir=cache_dir)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            block = _rpc(node.url, "eth_getBlockByNumber", ["0x0", False])
        except requests.RequestException:
            time.sleep(0.05)
            continue
        try:
            node.genesis_hash = verify_anvil(node, block, genesis)
        except AnvilError:
            node.stop()
            raise
        return node
    node.stop()
    raise AnvilError(f"anvil did not start on port {port} (log {log_path}):\n{node.log_tail()}")


def _genesis_time(extra_args: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
    """The genesis timestamp (the caller's ``--timestamp``, else now) and the arguments to add."""
    if "--timestamp" in extra_args:
        return int(extra_args[extra_args.index("--timestamp") + 1]), ()
    now = int(time.time())
    return now, ("--timestamp", str(now))


def verify_anvil(node: AnvilNode, genesis_block: dict, genesis_timestamp: int) -> str:
    """Block 0's hash, once the chain answering on ``node.port`` is this Anvil: its process is
    alive, its chain id is CHAIN_ID and its genesis block has the timestamp this one was started
    with (a stale Anvil, started at another time, has another genesis block). AnvilError else."""
    chain_id = int(_rpc(node.url, "eth_chainId", []), 16)
    timestamp = int(genesis_block["timestamp"], 16)
    if node.process.poll() is not None or chain_id != CHAIN_ID or timestamp != genesis_timestamp:
        raise AnvilError(
            f"port {node.port} answers with another chain (chain id {chain_id}, genesis "
            f"{genesis_block['hash']} of time {timestamp}), not the Anvil started now"
        )
    return str(genesis_block["hash"])


def _rpc(url: str, method: str, params: list[object]) -> Any:
    reply = requests.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout=2
    )
    result = reply.json().get("result")
    if result is None:
        raise requests.RequestException(f"{method}: {reply.text[:200]}")
    return result
