"""A private Kubo (IPFS) daemon per swarm node: its own repository, loopback ports, no internet.

``kubo_binary()`` finds ``ipfs``: ``$SWARM_KUBO_BIN``, then the tools folder of the cache root
(``node.defaults.cache_root``) that ``scripts/build-kubo`` (run by ``scripts/bootstrap``) fills,
then ``ipfs`` on PATH.

``start_kubo(repo, swarm_key)`` initialises ``repo`` once (``ipfs init``: a new peer id) and starts
``ipfs daemon`` on it with a configuration that never leaves the private swarm:

- a private network: ``swarm.key`` (one 32-byte pre-shared key for the whole swarm) and
  ``LIBP2P_FORCE_PNET=1``, so the daemon refuses to run without it and talks only to holders of
  the key;
- no bootstrap peers, no AutoConf (Kubo 0.4x fetches bootstrap and router lists from the
  internet unless it is off), ``Routing.Type = "none"`` (no DHT: peers connect explicitly through
  ``swarm/connect`` and bitswap asks the connected peers for a block), no mDNS, no providing, no
  HTTP retrieval, no relay, hole punching, NAT port mapping, AutoNAT or AutoTLS, telemetry off;
- TCP only (a private network cannot run QUIC, WebTransport or WebRTC), the swarm on
  ``swarm_host`` (loopback by default), the RPC API on 127.0.0.1, no gateway. Ports are chosen
  by the kernel (port 0) when the daemon binds them, so no other process can take them in
  between; a fixed ``swarm_port`` is checked free just before the start.

The configuration is rewritten at every start, so a restart on the same repository keeps its
peer id and blocks and picks new ports. Once the daemon says it is ready, its API must answer
``id`` with the repository's own peer id (the service is ours) within the startup timeout; any
failure names the daemon's log. The daemon dies with this process (node.local.children).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.defaults import cache_root
from node.local.children import die_with_parent, spawn, stop
from node.local.ports import port_holder, port_is_free
from node.storage.endpoint import StoreEndpoint
from node.storage.errors import StoreError
from node.storage.kubo import KuboStore

#: The pinned Kubo version; scripts/build-kubo builds the same one (a test checks they agree).
KUBO_VERSION = "v0.43.1"
SWARM_KEY_SIZE = 32
_API_LINE = re.compile(r"RPC API server listening on /ip4/127\.0\.0\.1/tcp/(\d+)")
_READY_LINE = "Daemon is ready"
_DISABLED_TRANSPORTS = ("Relay", "QUIC", "WebTransport", "WebRTCDirect", "Websocket")


class KuboMissing(RuntimeError):
    """No ``ipfs`` binary was found."""


class KuboDaemonError(RuntimeError):
    """The daemon could not be initialised or started, or is not the one we started."""


def tools_binary() -> Path:
    """Where scripts/build-kubo puts the pinned Kubo: ``tools/`` in the cache root."""
    return cache_root() / "tools" / f"kubo-{KUBO_VERSION}" / "ipfs"


def kubo_binary() -> Path:
    """``$SWARM_KUBO_BIN``, else the bootstrap's build, else ``ipfs`` on PATH; KuboMissing."""
    named = os.environ.get("SWARM_KUBO_BIN")
    if named:
        if not os.access(named, os.X_OK):
            raise KuboMissing(f"SWARM_KUBO_BIN={named} is not an executable file")
        return Path(named)
    built = tools_binary()
    if os.access(built, os.X_OK):
        return built
    found = shutil.which("ipfs")
    if found:
        return Path(found)
    raise KuboMissing(
        f"Kubo (ipfs) not found: not at {built} nor on PATH; run scripts/bootstrap "
        "(it builds Kubo when Go is installed) or set SWARM_KUBO_BIN"
    )


def new_swarm_key() -> bytes:
    """A fresh pre-shared key for a private swarm (every node of the swarm gets the same)."""
    return secrets.token_bytes(SWARM_KEY_SIZE)


def swarm_key_text(key: bytes) -> str:
    """The ``swarm.key`` file libp2p reads: ``/key/swarm/psk/1.0.0/``, base16, the key."""
    if not isinstance(key, bytes) or len(key) != SWARM_KEY_SIZE:
        raise ValueError(f"a swarm key is {SWARM_KEY_SIZE} bytes, got {key!r:.40}")
    return f"/key/swarm/psk/1.0.0/\n/base16/\n{key.hex()}\n"


@dataclass
class KuboDaemon:
    """A running ``ipfs daemon``: its RPC API, its libp2p identity and swarm addresses."""

    repo: Path
    process: subprocess.Popen[bytes]
    api_url: str
    peer_id: str
    addrs: tuple[str, ...]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def api_port(self) -> int:
        return int(self.api_url.rsplit(":", 1)[1])

    @property
    def swarm_port(self) -> int:
        """The TCP port of its first swarm address."""
        return int(self.addrs[0].split("/tcp/", 1)[1].split("/", 1)[0])

    def endpoint(self) -> StoreEndpoint:
        """Its peer id and swarm multiaddrs (without ``/p2p/<id>``)."""
        return StoreEndpoint(self.peer_id, self.addrs)

    def store(self, **options: Any) -> KuboStore:
        """A KuboStore on this daemon's API (options: ``timeout``, ``max_blob_size``)."""
        return KuboStore(self.api_url, **options)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM (Kubo shuts down cleanly), then SIGKILL if it does not within 10 s."""
        stop(self.process, grace=10.0)

    def log_tail(self, lines: int = 30) -> str:
        return _tail(self.log_path, lines)

    def __enter__(self) -> KuboDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def init_repo(repo: Path, *, binary: Path | None = None) -> str:
    """Creates the Kubo repository ``repo`` unless it exists; returns its peer id.

    Initialised in a sibling folder and renamed into place, so a killed ``init`` leaves no
    half-made repository behind.
    """
    if (repo / "config").is_file():
        return peer_id_of(repo)
    if repo.exists() and any(repo.iterdir()):
        raise KuboDaemonError(f"{repo} is neither empty nor a Kubo repository (no config)")
    repo.parent.mkdir(parents=True, exist_ok=True)
    scratch = repo.with_name(f".{repo.name}.init-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    env = {**os.environ, "IPFS_PATH": str(scratch), "IPFS_TELEMETRY": "off"}
    command = [str(binary or kubo_binary()), "init", "--empty-repo", "--profile", "test"]
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, preexec_fn=die_with_parent
    )
    if result.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise KuboDaemonError(f"ipfs init of {repo} failed: {result.stderr.strip()[:500]}")
    if repo.exists():
        repo.rmdir()
    scratch.rename(repo)
    return peer_id_of(repo)


def peer_id_of(repo: Path) -> str:
    """The peer id in the repository's config."""
    try:
        return str(json.loads((repo / "config").read_text())["Identity"]["PeerID"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise KuboDaemonError(f"cannot read the peer id of {repo}/config: {error}") from error


def configure(
    repo: Path, swarm_key: bytes, *, swarm_host: str, swarm_port: int, api_port: int = 0
) -> None:
    """Writes the private-network configuration and ``swarm.key`` (see the module docstring)."""
    path = repo / "config"
    config = json.loads(path.read_text())
    _apply_private_config(
        config, _swarm_multiaddr(swarm_host, swarm_port), _swarm_multiaddr("127.0.0.1", api_port)
    )
    _write_atomically(path, json.dumps(config, indent=2) + "\n")
    _write_atomically(repo / "swarm.key", swarm_key_text(swarm_key))


def _apply_private_config(config: dict[str, Any], swarm_addr: str, api_addr: str) -> None:
    def section(*keys: str) -> dict[str, Any]:
        node = config
        for key in keys:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        return node

    section("Addresses").update(Swarm=[swarm_addr], API=api_addr, Gateway=[])
    section("Addresses").update(Announce=[], AppendAnnounce=[])
    config["Bootstrap"] = []
    section("AutoConf")["Enabled"] = False
    section("Routing")["Type"] = "none"
    section("Discovery", "MDNS")["Enabled"] = False
    section("AutoNAT")["ServiceMode"] = "disabled"
    section("AutoTLS")["Enabled"] = False
    section("Provide")["Enabled"] = False
    section("HTTPRetrieval")["Enabled"] = False
    section("Swarm")["DisableNatPortMap"] = True
    section("Swarm")["EnableHolePunching"] = False
    section("Swarm", "RelayClient")["Enabled"] = False
    section("Swarm", "RelayService")["Enabled"] = False
    section("Swarm", "Transports", "Network").update(dict.fromkeys(_DISABLED_TRANSPORTS, False))
    section("Plugins", "Plugins", "telemetry")["Disabled"] = True


def _swarm_multiaddr(host: str, port: int) -> str:
    try:
        version = ipaddress.ip_address(host).version
    except ValueError:
        raise ValueError(f"the swarm listens on an IP address, got {host!r}") from None
    if not 0 <= port < 65536:
        raise ValueError(f"a TCP port is 0..65535, got {port}")
    return f"/ip{version}/{host}/tcp/{port}"


def start_kubo(
    repo: Path,
    swarm_key: bytes,
    *,
    swarm_host: str = "127.0.0.1",
    swarm_port: int = 0,
    api_port: int = 0,
    log_path: Path | None = None,
    startup_timeout: float = 60.0,
) -> KuboDaemon:
    """Starts a private daemon on ``repo`` (initialised if new); returns once its API is ours.

    Ports 0 are chosen free by the daemon; a restart that must keep its URLs passes the ports
    it had (``KuboDaemon.api_port`` and ``swarm_port``)."""
    binary = kubo_binary()
    peer_id = init_repo(repo, binary=binary)
    _check_not_in_use(repo)
    configure(repo, swarm_key, swarm_host=swarm_host, swarm_port=swarm_port, api_port=api_port)
    if swarm_port:
        _check_port_free("swarm", swarm_host, swarm_port)
    if api_port:
        _check_port_free("API", "127.0.0.1", api_port)
    log_path = log_path or repo / "daemon.log"
    env = {**os.environ, "IPFS_PATH": str(repo), "LIBP2P_FORCE_PNET": "1", "IPFS_TELEMETRY": "off"}
    with log_path.open("wb") as log:
        process = spawn(
            [str(binary), "daemon", "--migrate=false"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        api_url = _wait_ready(process, log_path, startup_timeout)
        addrs = _check_identity(api_url, peer_id, log_path)
    except BaseException:
        stop(process, grace=5.0)
        raise
    return KuboDaemon(repo, process, api_url, peer_id, addrs, log_path)


def _check_not_in_use(repo: Path) -> None:
    """KuboDaemonError if a daemon holds the repository's lock (an fcntl lock, as Kubo takes)."""
    lock = repo / "repo.lock"
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        message = f"{repo} is in use by another ipfs daemon ({lock} is locked)"
        raise KuboDaemonError(message) from error
    finally:
        os.close(fd)  # releases the probe's lock too


def _check_port_free(what: str, host: str, port: int) -> None:
    if not port_is_free(port, host):
        raise KuboDaemonError(f"{what} port {host}:{port} is taken by {port_holder(port)}")


def _wait_ready(process: subprocess.Popen[bytes], log_path: Path, timeout: float) -> str:
    """The API URL once the daemon's log says it is ready; KuboDaemonError otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        match = _API_LINE.search(text)
        if match and _READY_LINE in text:
            return f"http://127.0.0.1:{match.group(1)}"
        if process.poll() is not None:
            raise KuboDaemonError(
                f"ipfs daemon exited with {process.returncode} (log {log_path}):\n{_tail(log_path)}"
            )
        time.sleep(0.05)
    raise KuboDaemonError(f"ipfs daemon not ready after {timeout}s (log {log_path})")


def _check_identity(api_url: str, peer_id: str, log_path: Path) -> tuple[str, ...]:
    """The daemon's swarm addresses, once its API answers ``id`` with ``peer_id``."""
    store = KuboStore(api_url, timeout=10.0)
    try:
        endpoint = store.endpoint()
    except StoreError as error:
        raise KuboDaemonError(f"{error} (log {log_path})") from error
    finally:
        store.close()
    if endpoint.peer_id != peer_id:
        raise KuboDaemonError(
            f"{api_url} is not our daemon: it is {endpoint.peer_id}, ours is {peer_id} "
            f"(log {log_path})"
        )
    return endpoint.addrs


def _write_atomically(path: Path, text: str) -> None:
    """Owner-only (the config holds the private key; swarm.key is the swarm's secret)."""
    scratch = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    scratch.replace(path)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
