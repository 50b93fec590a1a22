"""What every check shares: the report line (:class:`Check`), what the checks read from this
machine (:class:`Probes`), and what earlier checks found that later ones build on (:class:`Run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.config import NodeConfig
from node.resources import available_memory, free_disk
from node.storage.endpoint import StoreEndpoint

if TYPE_CHECKING:
    from node.doctor.store import Announcements

Status = Literal["ok", "problem", "skipped"]


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, what was found, and the fix for a problem."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status.upper() if self.status == 'problem' else self.status:<8} "
        text += f"{self.name:<10} {self.detail}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def problem(name: str, detail: str, fix: str) -> Check:
    return Check(name, "problem", detail, fix)


def skipped(name: str, detail: str) -> Check:
    return Check(name, "skipped", detail)


@dataclass(frozen=True)
class Probes:
    """What the checks read from this machine (replaceable in tests)."""

    now: Callable[[], float] = time.time
    memory_available: Callable[[], int | None] = available_memory
    disk_free: Callable[[Path], int] = free_disk


@dataclass
class Run:
    """What the checks found so far (later checks build on earlier ones)."""

    config: NodeConfig
    probes: Probes
    deployment: Deployment | None = None
    client: CoordinatorClient | None = None
    contract: bool = False
    address: str | None = None
    kubo: StoreEndpoint | None = None
    announced: Announcements | None = None
