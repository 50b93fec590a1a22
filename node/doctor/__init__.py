"""``swarm doctor``: every check a volunteer's node needs to pass, each with the fix to make.

``run_checks(config)`` returns one :class:`Check` per report line, in this order:

- chain (node.doctor.chain): the deployment file; the RPC (reachable, the deployment's chain
  id); the contract (code at the address, the deployment block still there: not a reset chain);
  the keystore (unlocks with the configured password file or variable); the peer (registered,
  active, stake at least the contract's ``minStake``); funds (gas for 100 rounds at today's
  price); the clock (this machine's time against the latest block);
- store (node.doctor.store): a local folder is writable, or a Kubo API answers ``id``; this
  node's announced endpoint is its daemon's; the daemon is connected to at least one peer whose
  endpoint was announced on-chain;
- machine (node.doctor.machine): memory and disk for the configured model, group size and token
  limit (node.resources' formula).

A check that needs what an earlier one could not provide says so ("skipped"); only problems
fail. What the checks read from this machine (the time, memory, free disk) comes through
:class:`Probes`, so tests can shift the clock or shrink the memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from node.chain.rpc import short
from node.config import NodeConfig
from node.doctor.base import Check, Probes, Run, problem
from node.doctor.chain import (
    check_clock,
    check_contract,
    check_deployment,
    check_funds,
    check_keystore,
    check_peer,
    check_rpc,
)
from node.doctor.machine import check_disk, check_memory, workload
from node.doctor.store import check_announced, check_peers, check_store

CHECKS: tuple[Callable[[Run], Check], ...] = (
    check_deployment,
    check_rpc,
    check_contract,
    check_keystore,
    check_peer,
    check_funds,
    check_clock,
    check_store,
    check_announced,
    check_peers,
    check_memory,
    check_disk,
)

__all__ = ["CHECKS", "Check", "Probes", "failed", "report_lines", "run_checks", "workload"]


def run_checks(config: NodeConfig, *, probes: Probes | None = None) -> list[Check]:
    """Runs every check in order; one that fails unexpectedly becomes a problem line."""
    run = Run(config, probes or Probes())
    return [_guarded(check, run) for check in CHECKS]


def failed(checks: list[Check]) -> list[Check]:
    return [check for check in checks if check.status == "problem"]


def report_lines(checks: list[Check]) -> Iterator[str]:
    """The report: one line per check, then a summary."""
    for check in checks:
        yield check.line()
    problems = failed(checks)
    yield (
        f"{len(problems)} problem(s): fix them and run swarm doctor again"
        if problems
        else "no problems found"
    )


def _guarded(check: Callable[[Run], Check], run: Run) -> Check:
    try:
        return check(run)
    except Exception as exc:  # noqa: BLE001 - a diagnosis reports every failure as a line
        name = check.__name__.removeprefix("check_")
        return problem(name, short(exc), "do what the message says, then run swarm doctor again")
