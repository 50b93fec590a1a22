"""Many in-process nodes stepping through rounds together (the local swarm and the tests).

Every node produces its batch of the round, then every node completes it, so each sees all the
others' commitments; then ``advance`` moves the chain to the next round (on a dev chain, by time
travel: nobody waits for a wall-clock round to end).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from node.round.node import SwarmNode
from node.round.report import RoundReport


def run_lockstep(
    nodes: Sequence[SwarmNode],
    rounds: int,
    advance: Callable[[int], None],
    *,
    on_report: Callable[[RoundReport], None] = lambda report: None,
    should_stop: Callable[[], bool] = lambda: False,
) -> list[RoundReport]:
    """Runs ``rounds`` rounds of every node; ``advance(r)`` must make round ``r`` current.

    ``should_stop`` is asked before each node's step: a stop leaves every node's state saved
    (each step saves what it did), to be resumed by a later run.
    """
    if not nodes:
        raise ValueError("no nodes to run")
    for node in nodes:
        if node.state is None:
            node.start()
    reports: list[RoundReport] = []
    for _ in range(rounds):
        if should_stop():
            break
        round_ = nodes[0].current_round()
        for node in nodes:
            if should_stop():
                return reports
            node.produce(round_)
        for node in nodes:
            if should_stop():
                return reports
            report = node.complete(round_)
            reports.append(report)
            on_report(report)
        advance(round_ + 1)
    return reports
