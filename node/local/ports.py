"""The local swarm's ports: is one free, who holds it, and which one a service gets.

A port given on the command line must be free (else a one-line error naming what holds it); a
default port that is taken is replaced by a free one, and the user is told. The holder is read
from ``/proc/net/tcp*`` (the listening socket's inode) and ``/proc/<pid>/fd`` (who has it open);
where that is not readable (another user's process, not Linux) the message says so.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

_LISTEN = "0A"


class PortTaken(RuntimeError):
    """A requested port is held by another process."""


def free_port() -> int:
    """A port the kernel has free now on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could bind ``host:port`` now (as servers do: SO_REUSEADDR, so a
    previous run's connections in TIME_WAIT do not count)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_holder(port: int) -> str:
    """Who listens on ``port``: "pid 123 (anvil --port 8545 ...)", or why it is not known."""
    inodes = _listening_inodes(port)
    if not inodes:
        return "a process this user cannot see"
    for pid_dir in Path("/proc").glob("[0-9]*"):
        if _holds(pid_dir, inodes):
            return f"pid {pid_dir.name} ({_command(pid_dir)})"
    return "a process of another user"


def choose_port(requested: int | None, default: int, what: str, echo: Callable[[str], None]) -> int:
    """The port for ``what``: ``requested`` if free (PortTaken otherwise), any free one for 0,
    and for None ``default`` if free, else a free one (said through ``echo``)."""
    if requested == 0:
        return free_port()
    if requested is not None:
        if not port_is_free(requested):
            raise PortTaken(
                f"port {requested} for {what} is taken by {port_holder(requested)}: "
                "choose another (0: any free port)"
            )
        return requested
    if port_is_free(default):
        return default
    port = free_port()
    echo(f"port {default} is taken by {port_holder(default)}: {what} uses port {port} instead")
    return port


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == _LISTEN and _port_of(fields[1]) == port:
                inodes.add(fields[9])
    return inodes


def _port_of(address: str) -> int:
    """The port of a /proc/net/tcp address ("0100007F:1F90")."""
    return int(address.rsplit(":", 1)[1], 16)


def _holds(pid_dir: Path, inodes: set[str]) -> bool:
    try:
        links = {os.readlink(fd) for fd in (pid_dir / "fd").iterdir()}
    except OSError:
        return False
    return any(f"socket:[{inode}]" in links for inode in inodes)


def _command(pid_dir: Path) -> str:
    try:
        words = (pid_dir / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    line = " ".join(" ".join(w.decode(errors="replace") for w in words).split())
    return line if len(line) <= 80 else line[:77] + "..."
