"""Many in-process nodes stepping through rounds together (the local swarm and the tests).

Every node produces its batch of the round, then every node completes it, so each sees all the
others' commitments; then ``advance`` moves the chain to the next round (on a dev chain, by time
travel: nobody waits for a wall-clock round to end).

With ``together`` (the default) each phase runs through a :class:`Rendezvous`: the nodes' steps
still run one at a time in node order, but their generation (in produce) and their GRPO update
(in complete) wait for each other and run as one batch over the shared base model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from node.interrupt import Interrupted, interruptible
from node.round.learner import run_calls
from node.round.node import SwarmNode
from node.round.rendezvous import Rendezvous
from node.round.report import RoundReport


def run_lockstep(
    nodes: Sequence[SwarmNode],
    rounds: int,
    advance: Callable[[int], None],
    *,
    on_report: Callable[[RoundReport], None] = lambda report: None,
    should_stop: Callable[[], bool] = lambda: False,
    together: bool = True,
) -> list[RoundReport]:
    """Runs ``rounds`` rounds of every node; ``advance(r)`` must make round ``r`` current.

    ``should_stop`` is asked before each phase (and, without ``together``, before each node's
    step), and by generation and training within a step (``node.interrupt``): a stop leaves
    every node's state saved (each step saves what it finished), to be resumed by a later run.
    """
    if not nodes:
        raise ValueError("no nodes to run")
    for node in nodes:
        if node.state is None:
            node.start()
    rendezvous = Rendezvous(run_calls) if together else None
    for node in nodes:
        node.learner.rendezvous = rendezvous
    reports: list[RoundReport] = []
    try:
        _rounds(nodes, rounds, advance, on_report, should_stop, rendezvous, reports)
    except Interrupted:
        pass  # a stop during a step: what the steps finished is saved, the rest dropped
    finally:
        for node in nodes:
            node.learner.rendezvous = None
    return reports


def _rounds(
    nodes: Sequence[SwarmNode],
    rounds: int,
    advance: Callable[[int], None],
    on_report: Callable[[RoundReport], None],
    should_stop: Callable[[], bool],
    rendezvous: Rendezvous | None,
    reports: list[RoundReport],
) -> None:
    for _ in range(rounds):
        if should_stop():
            break
        round_ = nodes[0].current_round()
        _, finished = _phase(nodes, lambda node, r=round_: node.produce(r), should_stop, rendezvous)
        if not finished:
            break
        completed, finished = _phase(
            nodes, lambda node, r=round_: node.complete(r), should_stop, rendezvous
        )
        for report in completed:
            reports.append(report)
            on_report(report)
        if not finished:
            break
        advance(round_ + 1)


def _phase(
    nodes: Sequence[SwarmNode],
    step: Callable[[SwarmNode], RoundReport],
    should_stop: Callable[[], bool],
    rendezvous: Rendezvous | None,
) -> tuple[list[RoundReport], bool]:
    """Every node's ``step``: the reports of those that ran, and whether all of them did. A stop
    ends the steps early (Interrupted); the callers' own work between phases runs to its end."""
    with interruptible(should_stop):
        return _steps(nodes, step, should_stop, rendezvous)


def _steps(
    nodes: Sequence[SwarmNode],
    step: Callable[[SwarmNode], RoundReport],
    should_stop: Callable[[], bool],
    rendezvous: Rendezvous | None,
) -> tuple[list[RoundReport], bool]:
    if rendezvous is not None:
        if should_stop():
            return [], False
        return rendezvous.run([lambda node=node: step(node) for node in nodes]), True
    done = []
    for node in nodes:
        if should_stop():
            return done, False
        done.append(step(node))
    return done, True
