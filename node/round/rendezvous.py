"""Run several nodes' steps so that their model calls meet and run as one batch.

In-process nodes (the local swarm, the experiment) each run the same round code. Run one after
the other, every node's generation and training is a separate small batch; on a CPU the frozen
base's matrix products then cost nearly as much for 16 rows as for 64. A :class:`Rendezvous`
runs each node's step in its own thread, **one thread at a time, in node order**, so the order of
every side effect is the one of a sequential run. A step that reaches a model call
(``submit``) parks there; once every step has parked or finished, the main thread runs the parked
calls together (``execute``) and resumes the parked steps in node order with their results.

    rendezvous = Rendezvous(execute=run_calls)      # run_calls(list of calls) -> list of results
    reports = rendezvous.run([lambda: node.produce(r) for node in nodes])

``submit`` outside ``run`` (or from another thread) executes its call alone at once. An exception
in a step or in ``execute`` cancels the parked steps (their ``submit`` raises ``Cancelled``) and
is raised by ``run`` once every thread has ended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """Raised in a parked step when another step or the batched call failed."""


class _Worker(Generic[T]):
    """One step's thread and where it stands."""

    def __init__(self, index: int, step: Callable[[], T]) -> None:
        self.index = index
        self.step = step
        self.state = "ready"  # ready -> running -> parked -> running ... -> done
        self.call: Any = None
        self.reply: tuple[bool, Any] | None = None  # (ok, result or exception) of its call
        self.result: T | None = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None


class Rendezvous:
    """Meeting point of several steps' model calls (the module docstring)."""

    def __init__(self, execute: Callable[[list[Any]], list[Any]]) -> None:
        self.execute = execute
        self._cond = threading.Condition()
        self._turn: int | None = None
        self._local = threading.local()
        self._cancelled = False

    def submit(self, call: Any) -> Any:
        """``call``'s result: batched with the other steps' calls inside ``run``, else alone."""
        worker: _Worker[Any] | None = getattr(self._local, "worker", None)
        if worker is None:
            return self.execute([call])[0]
        with self._cond:
            worker.call, worker.reply, worker.state = call, None, "parked"
            self._turn = None
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._cancelled or self._turn == worker.index)
            if self._cancelled:
                raise Cancelled("another node's step failed")
            worker.state = "running"
            ok, value = worker.reply or (False, Cancelled("no reply"))
        if not ok:
            raise value
        return value

    def run(self, steps: Sequence[Callable[[], T]]) -> list[T]:
        """Runs ``steps`` as described above; their results, in order."""
        workers = [_Worker(i, step) for i, step in enumerate(steps)]
        self._cancelled = False
        for worker in workers:
            worker.thread = threading.Thread(
                target=self._work, args=(worker,), name=f"rendezvous-{worker.index}", daemon=True
            )
            worker.thread.start()
        try:
            self._drive(workers)
        finally:
            with self._cond:
                if any(w.state != "done" for w in workers):
                    self._cancelled = True
                    self._cond.notify_all()
            for worker in workers:
                assert worker.thread is not None
                worker.thread.join()
        failed = next((w.error for w in workers if w.error is not None), None)
        if failed is not None:
            raise failed
        return [w.result for w in workers]  # type: ignore[misc]

    def _drive(self, workers: list[_Worker[T]]) -> None:
        order = list(workers)
        while order:
            for worker in order:
                self._let_run(worker)
                if worker.error is not None:
                    return
            parked = [w for w in workers if w.state == "parked"]
            if not parked:
                return
            try:
                results = self.execute([w.call for w in parked])
                replies = [(True, r) for r in results]
            except Exception as exc:  # every parked step gets it, as if its own call raised
                replies = [(False, exc)] * len(parked)
            for worker, reply in zip(parked, replies, strict=True):
                worker.reply = reply
            order = parked

    def _let_run(self, worker: _Worker[T]) -> None:
        """Gives ``worker`` the turn and waits until it parks or finishes."""
        with self._cond:
            self._turn = worker.index
            self._cond.notify_all()
            self._cond.wait_for(
                lambda: (
                    worker.state == "done"
                    or (worker.state == "parked" and self._turn != worker.index)
                )
            )

    def _work(self, worker: _Worker[T]) -> None:
        self._local.worker = worker
        with self._cond:
            self._cond.wait_for(lambda: self._cancelled or self._turn == worker.index)
            if self._cancelled:
                worker.state = "done"
                self._cond.notify_all()
                return
            worker.state = "running"
        try:
            worker.result = worker.step()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            if not isinstance(exc, Cancelled):
                worker.error = exc
        finally:
            with self._cond:
                worker.state = "done"
                self._turn = None
                self._cond.notify_all()
