"""Where Foundry's native binaries (anvil, forge, cast) are: the one lookup for all Python code.

npm installs each tool twice: a Node.js wrapper (``node_modules/.bin/forge``) and the native binary
of this platform (``node_modules/@foundry-rs/forge-linux-amd64/bin/forge``). The wrapper spawns the
binary but always exits 0, so a failing ``forge test`` would look green; everything runs the native
binary. The shell scripts use ``scripts/foundry-bin``, which resolves the same path.
"""

from __future__ import annotations

import platform
from pathlib import Path

from node.chain.abi import REPO_ROOT

TOOLS = ("anvil", "forge", "cast")
_SYSTEMS = {"Linux": "linux", "Darwin": "darwin"}
_MACHINES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


class FoundryMissing(RuntimeError):
    """A Foundry tool is not installed for this platform, or the platform has no Foundry build."""


def platform_package(tool: str, system: str | None = None, machine: str | None = None) -> str:
    """The npm package holding ``tool``'s native binary here, e.g. ``forge-linux-amd64``."""
    if tool not in TOOLS:
        raise ValueError(f"unknown Foundry tool {tool!r} (expected one of {', '.join(TOOLS)})")
    system = system or platform.system()
    machine = machine or platform.machine()
    if system not in _SYSTEMS or machine.lower() not in _MACHINES:
        raise FoundryMissing(
            f"no Foundry build for {system}/{machine} (Linux or macOS, x86_64 or arm64)"
        )
    return f"{tool}-{_SYSTEMS[system]}-{_MACHINES[machine.lower()]}"


def foundry_binary(tool: str, root: Path = REPO_ROOT) -> Path:
    """Path of ``tool``'s native binary under ``root``/node_modules; FoundryMissing when absent."""
    path = root / "node_modules" / "@foundry-rs" / platform_package(tool) / "bin" / tool
    if not path.is_file():
        raise FoundryMissing(f"{tool} is not installed (expected {path}): run scripts/bootstrap")
    return path
