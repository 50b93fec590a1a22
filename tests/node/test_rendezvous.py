"""The rendezvous: steps run one at a time in order, their calls meet and run as one batch."""

from __future__ import annotations

import threading

import pytest

from node.round.rendezvous import Rendezvous


class Recorder:
    def __init__(self, fail_on: object = None) -> None:
        self.events: list[str] = []
        self.batches: list[list[object]] = []
        self.fail_on = fail_on

    def execute(self, calls: list[object]) -> list[object]:
        self.batches.append(list(calls))
        self.events.append(f"batch{calls}")
        if self.fail_on in calls:
            raise RuntimeError("the batched call failed")
        return [f"r{c}" for c in calls]


def test_steps_run_in_order_and_their_calls_meet() -> None:
    recorder = Recorder()
    rendezvous = Rendezvous(recorder.execute)

    def step(i: int) -> str:
        recorder.events.append(f"a{i}")
        first = rendezvous.submit(i)
        recorder.events.append(f"b{i}:{first}")
        if i != 1:  # node 1 makes one call only
            second = rendezvous.submit(10 + i)
            recorder.events.append(f"c{i}:{second}")
        return f"done{i}"

    results = rendezvous.run([lambda i=i: step(i) for i in range(3)])
    assert results == ["done0", "done1", "done2"]
    assert recorder.batches == [[0, 1, 2], [10, 12]]
    assert recorder.events == [
        "a0", "a1", "a2", "batch[0, 1, 2]",
        "b0:r0", "b1:r1", "b2:r2", "batch[10, 12]",
        "c0:r10", "c2:r12",
    ]  # fmt: skip


def test_a_failing_step_cancels_the_others_and_is_raised() -> None:
    recorder = Recorder()
    rendezvous = Rendezvous(recorder.execute)
    before = threading.active_count()

    def step(i: int) -> None:
        if i == 2:
            raise ValueError("node 2 broke")
        rendezvous.submit(i)
        recorder.events.append(f"after{i}")

    with pytest.raises(ValueError, match="node 2 broke"):
        rendezvous.run([lambda i=i: step(i) for i in range(3)])
    assert recorder.batches == [] and "after0" not in recorder.events
    assert threading.active_count() == before  # every step's thread has ended


def test_a_failing_batch_is_raised_in_every_step_that_waited_for_it() -> None:
    recorder = Recorder(fail_on=1)
    rendezvous = Rendezvous(recorder.execute)
    with pytest.raises(RuntimeError, match="batched call failed"):
        rendezvous.run([lambda i=i: rendezvous.submit(i) for i in range(2)])


def test_submit_outside_a_run_executes_alone() -> None:
    recorder = Recorder()
    rendezvous = Rendezvous(recorder.execute)
    assert rendezvous.submit(7) == "r7"
    assert recorder.batches == [[7]]
    assert rendezvous.run([lambda: rendezvous.submit(1)]) == ["r1"]  # reusable afterwards
