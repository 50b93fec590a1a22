"""Runs every unit (configuration x seed) of an experiment into one folder, resumably.

Folder layout::

    config.json                 the settings; a resumed run must be given the same ones
    runs.json                   one entry per invocation: time, versions, the update's precision,
                                git commit
    rounds.csv                  one row per node per round, appended as each round finishes
    samples.csv                 a few own completions per node per round (sample_texts)
    eval.csv                    held-out evaluations (eval_every)
    summary.md, summary.json    the table (rewritten after every unit and at the end)
    cumulative_reward.png, moving_average_reward.png
    units/c<I>-<J>-s<seed>/     progress.json, unit.json (genesis seed, peers), checkpoints

Resuming: with the in-process exchange each node's adapter and optimizer are checkpointed after
every round (``node.policy.checkpoint``) with the count of rounds done, so a killed unit resumes
from its last finished round (also when the kill fell between two nodes' saves) and produces the
same rows an uninterrupted run would (generation and selection seeds are derived from the seed,
the peer and the round). With the chain exchange a unit's chain lives in its Anvil process: a
killed unit is redone from round 0 on a fresh chain (its rows are dropped first); finished units
are kept. Either way, rows past a unit's recorded progress (a round cut in the middle) are dropped
from ``rounds.csv`` on resume.

A folder may be resumed with configurations or seeds added or left out (every other setting must
be the same): finished units are reused, new ones run, and the summary covers the ones asked for.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from node.experiment.chain import ChainUnit, experiment_accounts, start_chain_unit
from node.experiment.config import ExperimentConfig, Unit, load_config, save_config, units
from node.experiment.evaluation import evaluate, heldout_tasks
from node.experiment.outputs import (
    COLLAPSE_FORMAT_RATE,
    EVAL_COLUMNS,
    SAMPLE_COLUMNS,
    RoundsCsv,
    sample_cells,
    stability_cells,
    write_summary,
)
from node.policy.adapters import AdapterPool
from node.policy.checkpoint import rewind_checkpoint
from node.policy.model import BaseModel
from node.round.exchange import Exchange
from node.round.factory import build_node
from node.round.inprocess import InProcessSwarm
from node.round.learner import Learner
from node.round.lockstep import run_lockstep
from node.round.node import SwarmNode
from node.round.report import RoundReport
from node.tasks import TaskItem

log = logging.getLogger(__name__)

Echo = Callable[[str], None]


class ConfigMismatch(ValueError):
    """The output folder holds another experiment."""


def tasks_digest(node: SwarmNode, round: int) -> str:
    """A short hash of the node's questions and answers of ``round`` (same tasks, same digest)."""
    text = "\n".join(f"{t.question}\t{t.answer}" for t in node.tasks(round))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class UnitProgress:
    rounds_done: int = 0
    resumable: bool = True
    genesis_seed: str = ""
    peers: list[str] = field(default_factory=list)
    seconds: float = 0.0
    first_round: int | None = None  # the exchange's round of experiment round 0

    @classmethod
    def load(cls, path: Path) -> UnitProgress:
        if not path.exists():
            return cls()
        return cls(**json.loads(path.read_text()))

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=2) + "\n")
        tmp.replace(path)


class ExperimentRunner:
    """One invocation over an output folder (a later invocation with the same folder resumes)."""

    def __init__(
        self,
        config: ExperimentConfig,
        out: Path,
        *,
        load_model: Callable[[], BaseModel],
        learner_class: type[Learner] = Learner,
        echo: Echo = print,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.config = config
        self.out = Path(out)
        self.load_model = load_model
        self.learner_class = learner_class
        self.echo = echo
        self.should_stop = should_stop
        self.csv = RoundsCsv(self.out / "rounds.csv")
        self.eval_csv = RoundsCsv(self.out / "eval.csv", EVAL_COLUMNS)
        self.samples_csv = RoundsCsv(self.out / "samples.csv", SAMPLE_COLUMNS)
        self._heldout: list[TaskItem] | None = None
        self._pool: AdapterPool | None = None
        self._started = time.monotonic()
        self._round_seconds: list[float] = []
        self._advance: Callable[[int], None] = lambda round: None

    # ------------------------------------------------------------------ folder

    def unit_dir(self, unit: Unit) -> Path:
        return self.out / "units" / unit.slug

    def progress(self, unit: Unit) -> UnitProgress:
        return UnitProgress.load(self.unit_dir(unit) / "progress.json")

    def prepare(self) -> None:
        """Checks or writes ``config.json``; drops rows a killed run left past its progress."""
        self.out.mkdir(parents=True, exist_ok=True)
        saved = self.out / "config.json"
        known = units(self.config)
        if saved.exists():
            existing = load_config(saved)
            same_run = replace(existing, configs=self.config.configs, seeds=self.config.seeds)
            if same_run != self.config:
                raise ConfigMismatch(
                    f"{self.out} holds an experiment with other settings ({saved}); resume it with "
                    "the same settings (configurations and seeds may be added or left out) or "
                    "choose another output folder"
                )
            if existing != self.config:
                self.echo(
                    f"configurations {', '.join(c.label for c in self.config.configs)}, seeds "
                    f"{', '.join(map(str, self.config.seeds))} (the folder had "
                    f"{', '.join(c.label for c in existing.configs)}, seeds "
                    f"{', '.join(map(str, existing.seeds))}): finished units are reused"
                )
            known += [u for u in units(existing) if u not in known]
            self.echo(f"resuming the experiment in {self.out}")
        save_config(self.config, saved)
        done: dict[tuple[str, int], int] = {}
        for unit in known:
            progress = self.progress(unit)
            if not progress.resumable and progress.rounds_done < self.config.rounds:
                progress.rounds_done = 0  # a chain unit cut short is redone from round 0
            done[(unit.sharing.label, unit.seed)] = progress.rounds_done
        dropped = self.csv.keep(done)
        self.samples_csv.keep(done)
        # a finished evaluation after the last round done is kept; a cut one is redone
        self.eval_csv.keep(done, complete_at_done=self.config.nodes)
        if dropped:
            self.echo(f"dropped {dropped} rows of rounds that had not finished")
        self._log_run()

    def _log_run(self) -> None:
        path = self.out / "runs.json"
        runs = json.loads(path.read_text()) if path.exists() else []
        import torch

        from node.policy.precision import describe

        runs.append(
            {
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "exchange": self.config.exchange,
                "machine": platform.machine(),
                "system": platform.platform(terse=True),
                "python": platform.python_version(),
                "torch": torch.__version__,
                "torch_threads": torch.get_num_threads(),
                "update_precision": describe(self.config.precision),  # type: ignore[arg-type]
                **code_version(),
            }
        )
        path.write_text(json.dumps(runs, indent=2) + "\n")

    # ------------------------------------------------------------------ run

    def run(self) -> bool:
        """Runs what is left; returns True when every unit has finished."""
        self.prepare()
        todo = units(self.config)
        complete = True
        for index, unit in enumerate(todo, 1):
            progress = self.progress(unit)
            if progress.rounds_done >= self.config.rounds:
                self.echo(f"[{index}/{len(todo)}] {self._name(unit)}: done earlier")
                continue
            if self.should_stop():
                complete = False
                break
            if not self.run_unit(unit, index, len(todo)):
                complete = False
                break
            self.write_summary(complete=index == len(todo))
        self.write_summary(complete=complete)
        return complete

    def write_summary(self, *, complete: bool) -> None:
        rows = self.csv.rows()
        if rows:
            write_summary(self.out, self.config, rows, complete)

    def _name(self, unit: Unit) -> str:
        return f"config {unit.sharing.label} seed {unit.seed}"

    @property
    def pool(self) -> AdapterPool:
        if self._pool is None:
            self.echo(f"loading {self.config.model} ...")
            self._pool = AdapterPool(self.load_model())
        return self._pool

    def _adapter_name(self, unit: Unit, index: int) -> str:
        name, attempt = f"{unit.slug}_n{index}", 0
        while name in self.pool:  # a unit redone in this process starts from a fresh adapter
            attempt += 1
            name = f"{unit.slug}_n{index}_{attempt}"
        return name

    def _nodes(
        self, unit: Unit, exchanges: list[Exchange], state_dirs: list[Path]
    ) -> list[SwarmNode]:
        """The unit's nodes, built like any other node, over the shared base model."""
        accounts = experiment_accounts(unit.seed, self.config.nodes)
        return [
            build_node(
                self.config.node_config(unit, i, state_dir),
                account,
                exchange,
                pool=self.pool,
                name=self._adapter_name(unit, i),
                learner_class=self.learner_class,
            )
            for i, (account, exchange, state_dir) in enumerate(zip(accounts, exchanges, state_dirs))
        ]

    def _start_inprocess(self, unit: Unit, folder: Path, start: int) -> list[SwarmNode]:
        """Nodes on an in-process swarm at round ``start``, resumed from the runner's checkpoints.

        Each node's own state folder (``node-i/live``) is begun anew and gets no adapter
        checkpoints (they would never be read: ~0.1 s per node and round); the runner's checkpoint
        in ``node-i`` is saved only once every node has finished a round, so a unit cut in the
        middle of a round resumes from the last round all nodes finished. A unit begun anew
        starts without checkpoints, so that none of a killed first round can be kept.
        """
        genesis, first = InProcessSwarm.genesis_seed_for(unit.seed), 0
        if self.config.same_tasks_as:
            genesis, first = self._chain_start(unit)
        shape = self.config.batch_shape(unit.sharing)
        swarm = InProcessSwarm(genesis, round=first + start, shape=shape)
        live = [folder / f"node-{i}" / "live" for i in range(self.config.nodes)]
        for path in live:
            shutil.rmtree(path if start else path.parent, ignore_errors=True)
        nodes = self._nodes(unit, [swarm.exchange() for _ in live], live)
        for i, node in enumerate(nodes):
            node.saves_adapter = False
            node.start()
            if start:
                # a kill between two nodes' saves leaves some a round ahead: back to the last
                # round every node finished (the saves keep the previous snapshot for that)
                rewind_checkpoint(folder / f"node-{i}", start - 1)
                info = node.learner.restore(folder / f"node-{i}")
                if info is None or info.round != start - 1:
                    raise RuntimeError(
                        f"{folder / f'node-{i}'}: no checkpoint of round {start - 1}; "
                        "delete the unit's folder to redo it"
                    )
        self._advance = swarm.advance
        return nodes

    def _chain_start(self, unit: Unit) -> tuple[bytes, int]:
        """The genesis seed and first round of ``unit`` in the chain experiment named by
        ``same_tasks_as``: with them the in-process nodes see the chain run's task streams."""
        folder = Path(self.config.same_tasks_as)
        seen = UnitProgress.load(folder / "units" / unit.slug / "progress.json")
        if not seen.genesis_seed or seen.first_round is None:
            raise RuntimeError(
                f"{folder}: no chain run of {unit.slug} with its genesis seed and first round "
                "(run the chain experiment first, with this version)"
            )
        return bytes.fromhex(seen.genesis_seed.removeprefix("0x")), seen.first_round

    def _start_chain(self, unit: Unit, folder: Path) -> tuple[list[SwarmNode], ChainUnit]:
        accounts = experiment_accounts(unit.seed, self.config.nodes)
        chain_unit = start_chain_unit(
            folder, accounts, unit.seed, self.config.batch_shape(unit.sharing)
        )
        try:
            state_dirs = [folder / f"node-{i}" for i in range(self.config.nodes)]
            nodes = self._nodes(unit, list(chain_unit.exchanges), state_dirs)
            for node in nodes:
                node.start()
        except BaseException:
            chain_unit.stop()
            raise
        self._advance = chain_unit.advance
        return nodes, chain_unit

    def run_unit(self, unit: Unit, index: int, total: int) -> bool:
        """Runs (or resumes) one unit; returns False when stopped before its last round."""
        folder = self.unit_dir(unit)
        progress = self.progress(unit)
        chain_unit = None
        if self.config.exchange == "chain":
            start = 0
            nodes, chain_unit = self._start_chain(unit, folder)
            progress = UnitProgress(resumable=False)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            start = progress.rounds_done
            nodes = self._start_inprocess(unit, folder, start)
        try:
            first = nodes[0].current_round() - start  # the chain's round of experiment round 0
            self._check_genesis(unit, nodes)
            progress.genesis_seed = "0x" + nodes[0].genesis_seed.hex()
            progress.peers = [n.address for n in nodes]
            progress.first_round = first
            progress.save(folder / "progress.json")
            self.echo(
                f"[{index}/{total}] {self._name(unit)}: {self.config.exchange} exchange, "
                + (f"resuming at round {start}" if start else "from round 0")
            )
            by_peer = {n.address: i for i, n in enumerate(nodes)}
            pending: dict[int, list[RoundReport]] = {}
            round_started = [time.monotonic()]

            def on_report(report: RoundReport) -> None:
                pending.setdefault(report.round, []).append(report)
                if len(pending[report.round]) < len(nodes):
                    return
                reports = sorted(pending.pop(report.round), key=lambda r: by_peer[r.peer])
                round_ = report.round - first
                elapsed = self._finish_round(
                    unit, nodes, reports, round_, report.round, progress, folder, round_started[0]
                )
                round_started[0] = time.monotonic()
                self._round_seconds.append(elapsed)
                self._progress_line(unit, index, total, round_, reports, elapsed)

            if self._evaluation_due(start) and not self._evaluated(unit, start):
                self._evaluate(unit, nodes, start)
                round_started[0] = time.monotonic()  # the first round's time without it
            run_lockstep(
                nodes,
                self.config.rounds - start,
                self._advance,
                on_report=on_report,
                should_stop=self.should_stop,
                together=self.config.batch_nodes,
            )
        finally:
            if chain_unit is not None:
                chain_unit.stop()
        return progress.rounds_done >= self.config.rounds

    def _check_genesis(self, unit: Unit, nodes: list[SwarmNode]) -> None:
        """Every configuration of a seed must see the same genesis seed and peers."""
        mine = "0x" + nodes[0].genesis_seed.hex()
        for other in units(self.config):
            if other.seed != unit.seed or other == unit:
                continue
            seen = self.progress(other)
            if seen.genesis_seed and seen.genesis_seed != mine:
                raise RuntimeError(
                    f"{unit.slug} got genesis seed {mine}, {other.slug} had {seen.genesis_seed}: "
                    "the configurations would not see the same tasks"
                )

    def _finish_round(
        self,
        unit: Unit,
        nodes: list[SwarmNode],
        reports: list[RoundReport],
        round_: int,
        chain_round: int,
        progress: UnitProgress,
        folder: Path,
        started: float,
    ) -> float:
        """Records the round (rows, checkpoints, a due evaluation, progress); returns its
        seconds from ``started``, the evaluation not included."""
        rows: list[dict[str, Any]] = []
        for i, (node, report) in enumerate(zip(nodes, reports)):
            t = report.timings.seconds
            rows.append(
                {
                    "exchange": self.config.exchange,
                    "config": unit.sharing.label,
                    "local_setting": unit.sharing.local,
                    "external_setting": unit.sharing.external,
                    "seed": unit.seed,
                    "round": round_,
                    "node": i,
                    "peer": node.address,
                    "reward": "" if report.local_reward is None else f"{report.local_reward:.6f}",
                    "local_groups": report.local_groups,
                    "external_groups": report.external_groups,
                    "verified_peers": report.verified_peers,
                    "rejected": sum(report.rejections.values()),
                    "trained": int(report.trained),
                    "loss": "" if report.loss is None else f"{report.loss:.6f}",
                    "tasks_digest": tasks_digest(node, chain_round),
                    "generate_s": f"{t.get('generate', 0.0):.3f}",
                    "train_s": f"{t.get('train', 0.0):.3f}",
                    "busy_s": f"{report.timings.busy:.3f}",
                    "provenance_s": f"{t.get('provenance', 0.0):.3f}",
                    **stability_cells(report),
                }
            )
        self.csv.append(rows)
        where = {"exchange": self.config.exchange, "config": unit.sharing.label}
        self.samples_csv.append(
            [
                {**where, "seed": unit.seed, "round": round_, "node": i, **cells}
                for i, report in enumerate(reports)
                for cells in sample_cells(report, self.config.sample_texts)
            ]
        )
        if self.config.exchange == "inprocess":
            for i, node in enumerate(nodes):
                node.learner.save(
                    folder / f"node-{i}", round_, {"peer": node.address}, keep_previous=True
                )
        elapsed = time.monotonic() - started
        # the round counts as done as soon as every checkpoint is saved: a kill during the
        # evaluation must not leave the checkpoints a round ahead of progress.json
        progress.rounds_done = round_ + 1
        progress.seconds += elapsed
        progress.save(folder / "progress.json")
        if self._evaluation_due(round_ + 1):
            self._evaluate(unit, nodes, round_ + 1)
        return elapsed

    def _evaluation_due(self, trained: int) -> bool:
        """Evaluate before round 0, every ``eval_every`` rounds, and after the last."""
        every = self.config.eval_every
        return every > 0 and (trained % every == 0 or trained == self.config.rounds)

    def _evaluated(self, unit: Unit, trained: int) -> bool:
        """Whether ``eval.csv`` holds the evaluation after ``trained`` rounds of ``unit``."""
        return any(
            r["config"] == unit.sharing.label
            and int(r["seed"]) == unit.seed
            and int(r["round"]) == trained
            for r in self.eval_csv.rows()
        )

    def _evaluate(self, unit: Unit, nodes: list[SwarmNode], trained: int) -> None:
        """Every node's greedy accuracy on the held-out set, appended to ``eval.csv``."""
        if self._heldout is None:
            self._heldout = heldout_tasks(self.config.preset, self.config.eval_tasks)
        results = evaluate(
            self.pool,
            [node.learner.name for node in nodes],
            self._heldout,
            max_new_tokens=self.config.max_new_tokens,
        )
        self.eval_csv.append(
            [
                {
                    "exchange": self.config.exchange,
                    "config": unit.sharing.label,
                    "seed": unit.seed,
                    "round": trained,
                    "node": i,
                    "accuracy": f"{r.accuracy:.4f}",
                    "format_rate": f"{r.format_rate:.4f}",
                    "tasks": r.tasks,
                    "seconds": f"{r.seconds:.1f}",
                    "collapsed": int(r.format_rate < COLLAPSE_FORMAT_RATE),
                }
                for i, r in enumerate(results)
            ]
        )
        self.echo(
            f"  held-out after {trained} rounds ({results[0].tasks} tasks, "
            f"{results[0].seconds:.0f}s): accuracy "
            + " ".join(f"{r.accuracy:.3f}" for r in results)
            + ", format "
            + " ".join(f"{r.format_rate:.2f}" for r in results)
        )

    def _progress_line(
        self,
        unit: Unit,
        index: int,
        total: int,
        round_: int,
        reports: list[RoundReport],
        elapsed: float,
    ) -> None:
        rewards = [r.local_reward or 0.0 for r in reports]
        mean = sum(rewards) / len(rewards)
        left_rounds = self.config.rounds - round_ - 1
        left_units = sum(
            1
            for u in units(self.config)[index:]
            if self.progress(u).rounds_done < self.config.rounds
        )
        recent = self._round_seconds[-10:]
        per_round = sum(recent) / len(recent)
        eta = per_round * (left_rounds + left_units * self.config.rounds)
        self.echo(
            f"[{index}/{total}] {self._name(unit)} round {round_ + 1}/{self.config.rounds}: "
            f"reward {mean:.3f} ({' '.join(f'{x:.2f}' for x in rewards)}), groups "
            f"{sum(r.local_groups for r in reports)}+{sum(r.external_groups for r in reports)}, "
            f"{elapsed:.0f}s, elapsed {_clock(time.monotonic() - self._started)}, "
            f"eta {_clock(eta)}"
        )


def code_version() -> dict[str, Any]:
    """The git commit of the code running (and whether tracked files differ from it), for
    ``runs.json``; nothing outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        changes = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": commit, "modified": bool(changes)}


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
        if seconds >= 3600
        else (f"{seconds // 60}m{seconds % 60:02d}s")
    )


def run_experiment(
    config: ExperimentConfig,
    out: Path,
    *,
    load_model: Callable[[], BaseModel],
    learner_class: type[Learner] = Learner,
    echo: Echo = print,
    should_stop: Callable[[], bool] = lambda: False,
) -> bool:
    """Runs (or resumes) the experiment in ``out``; True when every unit has finished."""
    return ExperimentRunner(
        config,
        out,
        load_model=load_model,
        learner_class=learner_class,
        echo=echo,
        should_stop=should_stop,
    ).run()
