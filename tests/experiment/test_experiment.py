"""``swarm experiment`` with the tiny model: outputs, identical task streams, who uses peers'
groups, resume after a crash, the chain exchange and the command line.

The tiny random model never answers correctly; :class:`AnsweringLearner` (tests/integration)
appends the reference answer to every other completion so that groups carry a learning signal.
"""

from __future__ import annotations

import csv
import json
import subprocess
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from node.experiment.config import ExperimentConfig, Sharing
from node.experiment.outputs import EVAL_COLUMNS, RoundsCsv, moving_average
from node.experiment.runner import ConfigMismatch, run_experiment
from node.policy.checkpoint import read_checkpoint
from node.policy.grpo import ScoredGroup, StepMetrics
from node.policy.model import BaseModel, tiny_model
from tests.integration.swarm import AnsweringLearner

pytestmark = pytest.mark.timeout(120)

OUTPUTS = (
    "config.json",
    "rounds.csv",
    "summary.md",
    "summary.json",
    "cumulative_reward.png",
    "moving_average_reward.png",
)
# the columns that must not depend on whether a run was interrupted (not the timings)
RESULT_COLUMNS = (
    "config",
    "seed",
    "round",
    "node",
    "peer",
    "reward",
    "local_groups",
    "external_groups",
    "trained",
    "loss",
    "tasks_digest",
)


def _config(**overrides: object) -> ExperimentConfig:
    settings: dict[str, object] = dict(
        nodes=3,
        rounds=2,
        configs=(Sharing(2, 0), Sharing(1, 1), Sharing(0, 2)),
        exchange="inprocess",
        model="tiny",
        tasks_per_round=3,
        group_size=4,
        max_new_tokens=6,
        threads=1,
        check_provenance=False,  # AnsweringLearner writes answers: the recompute refuses them
    )
    settings.update(overrides)
    return ExperimentConfig(**settings)  # type: ignore[arg-type]


@pytest.fixture
def load_model(tiny_base: BaseModel) -> Callable[[], BaseModel]:
    """A fresh tiny model per run (an adapter pool injects LoRA layers into its base)."""

    def load() -> BaseModel:
        model = tiny_model(tiny_base.tokenizer, seed=0).eval().requires_grad_(False)
        return BaseModel(name="tiny", model=model, tokenizer=tiny_base.tokenizer)

    return load


def _rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "rounds.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _results(folder: Path) -> list[tuple[str, ...]]:
    return sorted(tuple(r[c] for c in RESULT_COLUMNS) for r in _rows(folder))


def _crashing(after: int) -> type[AnsweringLearner]:
    """A learner class whose ``after``-th training step (over all nodes) raises."""
    calls = [0]

    class Crashing(AnsweringLearner):
        def train(self, groups: list[ScoredGroup]) -> StepMetrics:  # type: ignore[override]
            calls[0] += 1
            if calls[0] == after:
                raise KeyboardInterrupt("killed")
            return super().train(groups)

    return Crashing


def _killed_while_saving(after: int) -> type[AnsweringLearner]:
    """A learner class whose ``after``-th checkpoint save (over all nodes) is killed."""
    calls = [0]

    class KilledWhileSaving(AnsweringLearner):
        def save(self, *args: Any, **kwargs: Any) -> Path:
            calls[0] += 1
            if calls[0] == after:
                raise KeyboardInterrupt("killed")
            return super().save(*args, **kwargs)

    return KilledWhileSaving


def _check_experiment(folder: Path, config: ExperimentConfig) -> list[dict[str, str]]:
    for name in OUTPUTS:
        assert (folder / name).stat().st_size > 0, name
    assert (folder / "cumulative_reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = _rows(folder)
    assert len(rows) == len(config.configs) * config.rounds * config.nodes
    assert {r["exchange"] for r in rows} == {config.exchange}

    # identical task streams: the same peers and the same questions per node per round
    tasks: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for r in rows:
        tasks[(r["round"], r["node"])].add((r["peer"], r["tasks_digest"]))
    assert len(tasks) == config.rounds * config.nodes
    assert all(len(seen) == 1 for seen in tasks.values()), tasks
    assert len({r["tasks_digest"] for r in rows}) == config.rounds * config.nodes

    # the baseline never trains on peers' groups; the shared configurations do
    external: dict[str, int] = defaultdict(int)
    local: dict[str, int] = defaultdict(int)
    for r in rows:
        external[r["config"]] += int(r["external_groups"])
        local[r["config"]] += int(r["local_groups"])
        assert int(r["local_groups"]) <= int(r["local_setting"])
        assert int(r["external_groups"]) <= int(r["external_setting"])
    baseline = config.baseline.label
    assert external[baseline] == 0 and local[baseline] > 0
    # a node without peers' groups to train on and no seat recomputes nothing
    assert all(float(r["provenance_s"]) == 0 for r in rows if r["config"] == baseline)
    for sharing in config.configs:
        if sharing.external:
            assert external[sharing.label] > 0, sharing
        if sharing.local == 0:
            assert local[sharing.label] == 0

    summary = json.loads((folder / "summary.json").read_text())
    assert summary["complete"] and summary["exchange"] == config.exchange
    assert summary["rounds"] == config.rounds
    assert [r["label"] for r in summary["results"]] == [c.label for c in config.configs]
    text = (folder / "summary.md").read_text()
    assert f"exchange: **{config.exchange}**" in text and "n/a (1 seed)" in text
    return rows


def test_inprocess_outputs_identical_tasks_and_resume(
    tmp_path: Path, load_model: Callable[[], BaseModel]
) -> None:
    config = _config()
    lines: list[str] = []
    whole = tmp_path / "whole"
    assert run_experiment(
        config, whole, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    _check_experiment(whole, config)
    assert any("config 1/1 seed 0 round 2/2: reward" in line for line in lines)
    node_folder = whole / "units" / "c1-1-s0" / "node-0"
    assert read_checkpoint(node_folder).round == config.rounds - 1  # the runner's checkpoint
    assert read_checkpoint(node_folder / "live") is None  # and no second one by the node
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode == 0:  # a git checkout: runs.json names the code that ran
        assert json.loads((whole / "runs.json").read_text())[-1]["commit"] == head.stdout.strip()

    # killed in the middle of the second configuration's second round (11th training step)
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, cut, load_model=load_model, learner_class=_crashing(11))
    progress = json.loads((cut / "units" / "c1-1-s0" / "progress.json").read_text())
    assert progress["rounds_done"] == 1
    assert len(_rows(cut)) == 2 * 3 + 1 * 3  # the first unit and one round of the second
    assert not (cut / "units" / "c0-2-s0" / "progress.json").exists()
    lines = []
    assert run_experiment(
        config, cut, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    assert "config 2/0 seed 0: done earlier" in "\n".join(lines)
    assert any("resuming at round 1" in line for line in lines)
    assert _results(cut) == _results(whole)

    # the folder belongs to these settings; configurations may be added or left out
    with pytest.raises(ConfigMismatch):
        run_experiment(config.merged(rounds=4), cut, load_model=load_model)
    lines = []
    extended = config.merged(configs=(Sharing(2, 0), Sharing(2, 1)))
    assert run_experiment(
        extended, cut, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    assert "config 2/0 seed 0: done earlier" in "\n".join(lines)
    assert any("config 2/1 seed 0 round 2/2" in line for line in lines)
    assert {r["config"] for r in _rows(cut)} == {"2/0", "1/1", "0/2", "2/1"}
    summary = json.loads((cut / "summary.json").read_text())
    assert [r["label"] for r in summary["results"]] == ["2/0", "2/1"]


def test_resuming_one_seed_keeps_the_rows_of_a_seed_run_two_invocations_before(
    tmp_path: Path, load_model: Callable[[], BaseModel]
) -> None:
    # seed 0 in one invocation, seed 1 in the next (killed), then seed 1 resumed: the folder's
    # config.json names seed 1 only by then, and seed 0's finished rows must survive the resume
    config = _config(configs=(Sharing(1, 1),))
    out = tmp_path / "run"
    assert run_experiment(config, out, load_model=load_model, learner_class=AnsweringLearner)
    seed_0 = [r for r in _rows(out) if r["seed"] == "0"]
    assert len(seed_0) == 2 * 3
    second = config.merged(seeds=(1,))
    with pytest.raises(KeyboardInterrupt):
        run_experiment(second, out, load_model=load_model, learner_class=_crashing(5))
    assert run_experiment(second, out, load_model=load_model, learner_class=AnsweringLearner)
    assert [r for r in _rows(out) if r["seed"] == "0"] == seed_0
    assert len([r for r in _rows(out) if r["seed"] == "1"]) == 2 * 3


def test_a_kill_between_two_nodes_checkpoint_saves_resumes_identically(
    tmp_path: Path, load_model: Callable[[], BaseModel]
) -> None:
    config = _config(configs=(Sharing(1, 1),), rounds=3)
    whole = tmp_path / "whole"
    assert run_experiment(config, whole, load_model=load_model, learner_class=AnsweringLearner)

    # node 0 has saved round 1, nodes 1 and 2 have not: they are a round apart
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, cut, load_model=load_model, learner_class=_killed_while_saving(5))
    unit = cut / "units" / "c1-1-s0"
    assert json.loads((unit / "progress.json").read_text())["rounds_done"] == 1
    assert [read_checkpoint(unit / f"node-{i}").round for i in range(3)] == [1, 0, 0]

    lines: list[str] = []
    assert run_experiment(
        config, cut, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    assert any("resuming at round 1" in line for line in lines)
    assert _results(cut) == _results(whole)
    for i in range(3):  # the last round's snapshot and the one before it
        rounds = sorted(p.name[6:14] for p in (unit / f"node-{i}").glob("round-*"))
        assert rounds == ["00000001", "00000002"]


@pytest.mark.integration
def test_chain_exchange_and_redo_after_a_crash(
    tmp_path: Path, load_model: Callable[[], BaseModel]
) -> None:
    config = _config(exchange="chain", configs=(Sharing(2, 0), Sharing(1, 2)))
    folder = tmp_path / "chain"
    # killed in the second configuration's second round: that configuration is redone
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, folder, load_model=load_model, learner_class=_crashing(11))
    lines: list[str] = []
    assert run_experiment(
        config, folder, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    assert "dropped 3 rows" in "\n".join(lines)
    assert any("config 1/2 seed 0: chain exchange, from round 0" in line for line in lines)
    rows = _check_experiment(folder, config)
    seeds = {
        json.loads((folder / "units" / u / "progress.json").read_text())["genesis_seed"]
        for u in ("c2-0-s0", "c1-2-s0")
    }
    assert len(seeds) == 1
    assert all(int(r["verified_peers"]) == config.nodes - 1 for r in rows)


def test_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from node.cli import main

    toml = tmp_path / "exp.toml"
    toml.write_text('[experiment]\nnodes = 3\nconfigs = ["2/0", "1/1"]\nrounds = 2\n')
    seen: dict[str, object] = {}

    def fake_run(config: ExperimentConfig, out: Path, **kwargs: object) -> bool:
        seen["config"], seen["out"] = config, out
        return True

    monkeypatch.setattr("node.experiment.runner.run_experiment", fake_run)
    monkeypatch.setattr("torch.set_num_threads", lambda n: None)
    result = CliRunner().invoke(
        main,
        ["experiment", "--out", str(tmp_path / "o"), "--config-file", str(toml), "--inprocess"]
        + ["--rounds", "5", "--seed", "1", "--seed", "2", "--lr", "0.001", "--model", "tiny"]
        + ["--same-tasks-as", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    config = seen["config"]
    assert isinstance(config, ExperimentConfig)
    assert config.nodes == 3 and config.rounds == 5 and config.seeds == (1, 2)
    assert config.configs == (Sharing(2, 0), Sharing(1, 1)) and config.exchange == "inprocess"
    assert config.lr == 0.001 and config.baseline == Sharing(2, 0)
    assert config.same_tasks_as == str(tmp_path)

    on_chain = ["experiment", "--out", str(tmp_path / "c"), "--same-tasks-as", str(tmp_path)]
    chain = CliRunner().invoke(main, on_chain)
    assert chain.exit_code != 0 and "in-process exchange only" in chain.output

    bad = CliRunner().invoke(main, ["experiment", "--out", str(tmp_path), "--config", "2x2"])
    assert bad.exit_code != 0 and "write I/J" in bad.output


def test_moving_average_and_config_parsing() -> None:
    assert moving_average([1.0, 0.0, 1.0, 1.0], 2) == [1.0, 0.5, 0.5, 1.0]
    assert Sharing.parse(" 4 / 4 ") == Sharing(4, 4)
    with pytest.raises(ValueError):
        Sharing.parse("0/0")
    with pytest.raises(ValueError):
        ExperimentConfig(exchange="carrier-pigeon")
    assert ExperimentConfig(configs=(Sharing(2, 2), Sharing(3, 1))).baseline == Sharing(2, 2)


def _eval_rows(folder: Path) -> list[tuple[str, ...]]:
    with (folder / "eval.csv").open(newline="") as f:
        return [
            (r["config"], r["seed"], r["round"], r["node"], r["accuracy"], r["format_rate"])
            for r in csv.DictReader(f)
        ]


def test_held_out_evaluation_every_round_survives_a_resume(
    tmp_path: Path, load_model: Callable[[], BaseModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(configs=(Sharing(1, 1),), eval_every=1, eval_tasks=6)
    whole = tmp_path / "whole"
    lines: list[str] = []
    assert run_experiment(
        config, whole, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    rows = _eval_rows(whole)
    assert [(r[2], r[3]) for r in rows] == [(str(k), str(n)) for k in range(3) for n in range(3)]
    assert any("held-out after 2 rounds (6 tasks" in line for line in lines)

    cut = tmp_path / "cut"  # killed in round 2's training (the 5th step): redone on resume
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, cut, load_model=load_model, learner_class=_crashing(5))
    assert run_experiment(config, cut, load_model=load_model, learner_class=AnsweringLearner)
    assert _eval_rows(cut) == rows  # nothing lost, nothing twice, the same greedy answers

    # killed during the evaluation after round 1: round 1 stays done, its evaluation is redone
    from node.experiment import runner

    evaluations, evaluate = [0], runner.evaluate

    def killed_in_the_second(*args: Any, **kwargs: Any) -> Any:
        evaluations[0] += 1
        if evaluations[0] == 2:
            raise KeyboardInterrupt("killed")
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(runner, "evaluate", killed_in_the_second)
    in_eval = tmp_path / "in-eval"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, in_eval, load_model=load_model, learner_class=AnsweringLearner)
    monkeypatch.undo()
    lines = []
    assert run_experiment(
        config, in_eval, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    assert any("resuming at round 1" in line for line in lines)
    assert _eval_rows(in_eval) == rows

    # stopped cleanly after round 1's evaluation: the resume does not evaluate round 1 again
    stopped = tmp_path / "stopped"
    progress = stopped / "units" / "c1-1-s0" / "progress.json"

    def after_round_1() -> bool:
        return progress.exists() and json.loads(progress.read_text())["rounds_done"] >= 1

    assert not run_experiment(
        config, stopped, load_model=load_model, learner_class=AnsweringLearner,
        should_stop=after_round_1,
    )  # fmt: skip
    lines = []
    assert run_experiment(
        config, stopped, load_model=load_model, learner_class=AnsweringLearner, echo=lines.append
    )
    assert any("resuming at round 1" in line for line in lines)
    assert not any("held-out after 1 rounds" in line for line in lines)
    assert _eval_rows(stopped) == rows


def test_keeping_rows_of_finished_rounds_and_whole_evaluations(tmp_path: Path) -> None:
    table = RoundsCsv(tmp_path / "eval.csv", EVAL_COLUMNS)
    row = {"exchange": "inprocess", "config": "2/2", "seed": 0, "accuracy": "0.5"}
    row |= {"format_rate": "1.0", "tasks": 6, "seconds": "1.0"}
    table.append([row | {"round": 1, "node": n} for n in range(3)])  # whole, round 1 of seed 0
    table.append([row | {"round": 1, "node": n, "seed": 1} for n in range(2)])  # 2 of 3 nodes
    with table.path.open("a") as f:
        f.write("inprocess,2/2,0,2,0,0.5")  # a line cut short by a kill
    assert table.keep({("2/2", 0): 1, ("2/2", 1): 1}, complete_at_done=3) == 3
    assert [(r["seed"], r["round"]) for r in table.rows()] == [("0", "1")] * 3
    assert table.keep({("2/2", 0): 1}) == 3  # without complete_at_done: only rounds < done
    assert table.rows() == []
    table.append([row | {"round": 4, "node": 0, "seed": 7}])
    assert table.keep({("2/2", 0): 1}) == 0  # a unit it is not told of is left as it is
    assert [(r["seed"], r["round"]) for r in table.rows()] == [("7", "4")]


@pytest.mark.integration
def test_the_in_process_exchange_gives_the_chain_runs_rows(
    tmp_path: Path, load_model: Callable[[], BaseModel]
) -> None:
    on_chain = tmp_path / "chain"
    chain = _config(exchange="chain", configs=(Sharing(2, 0), Sharing(1, 2)))
    assert run_experiment(chain, on_chain, load_model=load_model, learner_class=AnsweringLearner)
    in_memory = tmp_path / "inprocess"
    config = chain.merged(exchange="inprocess", same_tasks_as=str(on_chain))
    assert run_experiment(config, in_memory, load_model=load_model, learner_class=AnsweringLearner)
    rows = _results(on_chain)
    assert len(rows) == 2 * 3 * 2 and any(r[RESULT_COLUMNS.index("loss")] for r in rows)
    assert _results(in_memory) == rows  # same tasks, samples, verdicts, selections and losses


def test_same_tasks_as_needs_a_chain_run(
    tmp_path: Path, load_model: Callable[[], BaseModel]
) -> None:
    config = _config(configs=(Sharing(1, 1),), same_tasks_as=str(tmp_path))
    with pytest.raises(RuntimeError, match="no chain run"):
        run_experiment(config, tmp_path / "out", load_model=load_model)
    with pytest.raises(ValueError, match="in-process exchange only"):
        _config(exchange="chain", same_tasks_as=str(tmp_path))
