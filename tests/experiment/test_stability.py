"""Issue 25, "Stable updates": the experiment's knobs reach the GRPO update and the adapter, and
``rounds.csv``, ``samples.csv``, ``eval.csv`` and the summary show whether training stayed stable
(step kind, gradient norm, KL, peers' weighting, cut and format rates, collapsed nodes)."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from node.experiment.config import ExperimentConfig, Sharing, Unit, load_config
from node.experiment.heldout_report import heldout_collapses
from node.experiment.outputs import (
    COLUMNS,
    EVAL_COLUMNS,
    SAMPLE_COLUMNS,
    RoundsCsv,
    collapse_markdown,
    first_collapsed_round,
    round_collapses,
    sample_cells,
    stability_cells,
    write_summary,
)
from node.experiment.runner import ConfigMismatch, ExperimentRunner, run_experiment
from node.learning_data import (
    GeneratedCompletion,
    GeneratedGroup,
    StepMetrics,
    TextCompletion,
)
from node.policy.adapters import AdapterPool
from node.policy.model import BaseModel
from node.round.factory import learner_settings
from node.round.own import OwnRound
from node.round.report import RoundReport
from node.round.sample_stats import cut_rate, format_rate, own_samples
from node.tasks.scoring import strict_answer
from tests.experiment.test_experiment import _config, load_model  # noqa: F401 (a fixture)
from tests.integration.swarm import AnsweringLearner

pytestmark = pytest.mark.timeout(120)


NEW_SETTINGS = {
    "beta": 0.05,
    "lora_targets": "attention+mlp",
    "peer_weight": 0.5,
    "peers_only_steps": False,
    "peer_logprob_gap": 1.5,
    "peer_importance": "truncate",
    "peer_importance_cap": 3.0,
    "peer_advantage": "positive",
}


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------ the knobs


def test_the_settings_reach_the_grpo_update_and_the_lora_adapter(
    load_model: Callable[[], BaseModel],  # noqa: F811
) -> None:
    config = ExperimentConfig(model="tiny", **NEW_SETTINGS)  # type: ignore[arg-type]
    settings = learner_settings(config.node_config(Unit(Sharing(2, 2), 0), 1, Path("/nowhere")))
    grpo = settings.grpo
    assert grpo.beta == 0.05 and grpo.peer_weight == 0.5 and grpo.peers_only_steps is False
    assert grpo.peer_logprob_gap == 1.5 and grpo.peer_importance == "truncate"
    assert grpo.peer_importance_cap == 3.0 and grpo.peer_advantage == "positive"
    assert settings.optimizer.lr == config.lr
    assert "down_proj" in settings.lora.target_modules

    pool = AdapterPool(load_model())
    pool.add("wide", settings.lora, seed=0)
    attention = ExperimentConfig(lora_targets="attention")
    narrow = learner_settings(attention.node_config(Unit(Sharing(2, 2), 0), 1, Path()))
    pool.add("attention", narrow.lora, seed=0)
    trained = {
        name: {key.split(".")[-3] for key in pool.adapter_parameters(name)}
        for name in ("wide", "attention")
    }
    assert trained["wide"] == {"q_proj", "k_proj", "v_proj", "o_proj"} | {
        "gate_proj", "up_proj", "down_proj",
    }  # fmt: skip
    assert trained["attention"] == {"q_proj", "k_proj", "v_proj", "o_proj"}


def test_the_command_line_and_a_toml_file_set_every_new_knob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from node.cli import main

    seen: dict[str, ExperimentConfig] = {}

    def fake_run(config: ExperimentConfig, out: Path, **kwargs: object) -> bool:
        seen["config"] = config
        return True

    monkeypatch.setattr("node.experiment.runner.run_experiment", fake_run)
    monkeypatch.setattr("torch.set_num_threads", lambda n: None)
    options = ["--beta", "0.05", "--lora-targets", "attention+mlp", "--peer-weight", "0.5"]
    options += ["--no-peers-only-steps", "--peer-logprob-gap", "1.5", "--sample-texts", "3"]
    options += ["--peer-importance", "truncate", "--peer-importance-cap", "3"]
    options += ["--peer-advantage", "positive"]
    result = CliRunner().invoke(main, ["experiment", "--out", str(tmp_path / "o"), *options])
    assert result.exit_code == 0, result.output
    config = seen["config"]
    assert {k: getattr(config, k) for k in NEW_SETTINGS} == NEW_SETTINGS
    assert config.sample_texts == 3

    toml = tmp_path / "exp.toml"
    toml.write_text(
        "[experiment]\nbeta = 0.05\nlora_targets = \"attention+mlp\"\npeer_weight = 0.5\n"
        "peers_only_steps = false\npeer_logprob_gap = 1.5\npeer_importance = \"truncate\"\n"
        "peer_importance_cap = 3.0\npeer_advantage = \"positive\"\n"
    )
    assert {k: getattr(ExperimentConfig.from_toml(toml), k) for k in NEW_SETTINGS} == NEW_SETTINGS

    no_gap = ["experiment", "--out", str(tmp_path / "n"), "--peer-logprob-gap", "none"]
    off = CliRunner().invoke(main, no_gap)
    assert off.exit_code == 0, off.output
    assert seen["config"].peer_logprob_gap is None and ExperimentConfig().peer_logprob_gap == 1.0
    toml.write_text('[experiment]\npeer_logprob_gap = "none"\n')
    assert ExperimentConfig.from_toml(toml).peer_logprob_gap is None

    for bad, message in (
        (["--peer-logprob-gap", "0"], "a number of nats > 0, or none"),
        (["--peer-weight", "0"], "--peer-weight"),
        (["--peer-importance-cap", "1"], "--peer-importance-cap"),
        (["--lora-targets", "mlp"], "--lora-targets"),
    ):
        refused = CliRunner().invoke(main, ["experiment", "--out", str(tmp_path / "x"), *bad])
        assert refused.exit_code != 0 and message in refused.output


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"lora_targets": "mlp"}, r"lora_targets 'mlp': one of attention, attention\+mlp"),
        ({"beta": -0.1}, "beta = -0.1"),
        ({"lr": 0.0}, "lr = 0.0"),
        ({"peer_weight": 1.5}, r"peer_weight = 1.5: must be in \(0, 1\]"),
        ({"peer_logprob_gap": 0.0}, "peer_logprob_gap = 0.0: must be > 0"),
        ({"peer_importance": "clip"}, "peer_importance 'clip': one of none, truncate, mask"),
        ({"peer_importance_cap": 1.0}, "peer_importance_cap = 1.0: must be > 1"),
        ({"peer_advantage": "best"}, "peer_advantage 'best': one of all, positive"),
        ({"sample_texts": -1}, "sample_texts = -1"),
    ],
)
def test_a_bad_setting_is_refused_saying_what_is_allowed(
    setting: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**setting)


def test_a_run_folder_of_the_old_code_resumes_with_what_it_ran_with(
    tmp_path: Path, load_model: Callable[[], BaseModel]  # noqa: F811
) -> None:
    before = {"lora_targets": "attention", "peers_only_steps": True}
    before |= {"peer_logprob_gap": None, "peer_importance": "none"}
    config = _config(configs=(Sharing(1, 1),), **before)
    old = {k: v for k, v in config.to_json().items() if k not in NEW_SETTINGS}
    del old["sample_texts"]
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert load_config(tmp_path / "config.json") == config
    # today's defaults are other rules: resuming under them is refused, not silently mixed
    with pytest.raises(ConfigMismatch, match="other settings"):
        ExperimentRunner(
            _config(configs=(Sharing(1, 1),)), tmp_path, load_model=load_model, echo=print
        ).prepare()
    # rounds.csv and eval.csv of the old code: the new columns read empty, then are added
    old_columns = COLUMNS[: COLUMNS.index("busy_s") + 1]
    old_row = {c: "0" for c in old_columns} | {"config": "1/1", "round": "0", "reward": "0.5"}
    with (tmp_path / "rounds.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=old_columns)
        writer.writeheader()
        writer.writerows([old_row | {"node": str(n)} for n in range(3)])
    table = RoundsCsv(tmp_path / "rounds.csv")
    assert all(r["step_kind"] == "" and r["format_rate"] == "" for r in table.rows())
    write_summary(tmp_path, config, table.rows(), complete=False)  # old rows summarise
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["collapse"][0]["rounds_collapsed"] == 0
    table.append([old_row | {"node": "3", "step_kind": "own"}])  # rewritten with the new header
    upgraded = _csv(tmp_path / "rounds.csv")
    assert tuple(upgraded[0]) == COLUMNS and len(upgraded) == 4
    assert [r["step_kind"] for r in upgraded] == ["", "", "", "own"]
    assert [r["reward"] for r in upgraded] == ["0.5"] * 4
    runner = ExperimentRunner(config, tmp_path, load_model=load_model, echo=lambda line: None)
    runner.prepare()  # no ConfigMismatch (round 0 of the unit is not done: its rows go)
    assert table.rows() == []


# ------------------------------------------------------------------ what a round shows


def _completion(text: str, finish_reason: str) -> GeneratedCompletion:
    ids = (1, 2) if finish_reason == "stop" else (1, 2, 3)
    return GeneratedCompletion(text, ids, finish_reason)  # type: ignore[arg-type]


def test_cut_and_format_rates_and_samples_of_the_own_completions() -> None:
    answered = _completion("so <answer>4</answer>", "stop")
    cut = _completion("so <answer>4</answer> and on", "length")
    trailing = _completion("<answer>4</answer> more", "stop")
    groups = (GeneratedGroup((5,), (answered, cut)), GeneratedGroup((6,), (trailing, answered)))
    own = OwnRound.from_generated([], groups, [[1.0, 0.0], [0.0, 1.0]])
    samples = own_samples(own)
    assert [(s.text, s.finish_reason, s.reward) for s in samples[:2]] == [
        ("so <answer>4</answer>", "stop", 1.0),
        ("so <answer>4</answer> and on", "length", 0.0),
    ]
    assert cut_rate(samples) == 0.25 and format_rate(samples) == 0.5
    # reloaded from the store after a restart: the published texts and finish reasons
    reloaded = OwnRound(
        tasks=(),
        texts=own.texts,
        rewards=own.rewards,
        reloaded=tuple(
            tuple(TextCompletion(c.text, c.finish_reason) for c in g.completions) for g in groups
        ),
    )
    assert own_samples(reloaded) == samples
    assert cut_rate(()) is None and format_rate(()) is None


def test_a_crafted_report_gives_its_rounds_csv_and_samples_csv_cells() -> None:
    report = RoundReport(round=3, peer="0xabc")
    report.record_step(
        StepMetrics(
            loss=0.25, mean_reward=0.5, clip_fraction=0.0, kl=0.0123456789, grad_norm=2.5,
            num_tokens=40, num_sequences=8, num_groups=2, skipped=False, seconds=1.0,
            kind="mixed", peer_logprob_gap=-0.75, peer_ess=0.8125, peer_groups_dropped=1,
        )
    )  # fmt: skip
    own = OwnRound.from_generated(
        [],
        [GeneratedGroup((5,), (_completion("a,\n<answer>1</answer>", "stop"),
                               _completion('"quoted", cut', "length")))],
        [[1.0, 0.0]],
    )  # fmt: skip
    report.samples = own_samples(own)
    report.cut_rate, report.format_rate = cut_rate(report.samples), format_rate(report.samples)
    assert report.trained and report.loss == 0.25
    assert stability_cells(report) == {
        "step_kind": "mixed",
        "grad_norm": "2.5",
        "kl": "0.0123457",
        "peer_logprob_gap": "-0.75",
        "peer_ess": "0.8125",
        "peer_groups_dropped": "1",
        "cut_rate": "0.5000",
        "format_rate": "0.5000",
    }
    report.kl = 1.5e-7  # the first steps' KL: significant digits, not decimals
    assert stability_cells(report)["kl"] == "1.5e-07"
    assert sample_cells(report, 1) == [
        {"reward": "1.000000", "finish_reason": "stop", "text": "a,\n<answer>1</answer>"}
    ]
    assert len(sample_cells(report, 5)) == 2 and sample_cells(report, 0) == []

    idle = RoundReport(round=4, peer="0xabc")
    assert stability_cells(idle) == {
        "step_kind": "none", "grad_norm": "", "kl": "", "peer_logprob_gap": "",
        "peer_ess": "", "peer_groups_dropped": "0", "cut_rate": "", "format_rate": "",
    }  # fmt: skip
    idle.record_step(
        StepMetrics(
            loss=0.0, mean_reward=0.0, clip_fraction=0.0, kl=None, grad_norm=0.0, num_tokens=0,
            num_sequences=0, num_groups=0, skipped=True, seconds=0.0,
        )
    )  # fmt: skip
    assert not idle.trained and idle.grad_norm is None and idle.step_kind == "none"


def test_a_tiny_experiment_writes_the_stability_columns_and_samples(
    tmp_path: Path, load_model: Callable[[], BaseModel]  # noqa: F811
) -> None:
    config = _config(configs=(Sharing(2, 0), Sharing(0, 2)), beta=0.1, sample_texts=100)
    folder = tmp_path / "run"
    assert run_experiment(config, folder, load_model=load_model, learner_class=AnsweringLearner)
    rows = _csv(folder / "rounds.csv")
    assert len(rows) == 2 * config.rounds * config.nodes
    assert tuple(rows[0]) == COLUMNS
    kinds = defaultdict(set)
    for r in rows:
        kinds[r["config"]].add(r["step_kind"])
        assert 0.0 <= float(r["cut_rate"]) <= 1.0 and 0.0 <= float(r["format_rate"]) <= 1.0
        if r["trained"] == "1":
            assert float(r["grad_norm"]) >= 0.0 and r["kl"] != ""  # beta > 0: KL computed
        if r["peer_ess"]:
            assert 0.0 <= float(r["peer_ess"]) <= 1.0
        assert int(r["peer_groups_dropped"]) >= 0
    assert kinds["2/0"] <= {"own", "none"} and kinds["0/2"] <= {"peers", "none"}
    assert any(r["trained"] == "1" for r in rows)

    # every own completion (sample_texts >= n x G): the rates are those of these samples
    samples = _csv(folder / "samples.csv")
    assert tuple(samples[0]) == SAMPLE_COLUMNS
    n, g = config.tasks_per_round, config.group_size
    assert len(samples) == len(rows) * n * g
    by_node: dict[tuple[str, str, str], list[dict[str, str]]] = defaultdict(list)
    for s in samples:
        by_node[(s["config"], s["round"], s["node"])].append(s)
    for r in rows:
        mine = by_node[(r["config"], r["round"], r["node"])]
        cut = sum(s["finish_reason"] == "length" for s in mine) / len(mine)
        formatted = sum(
            strict_answer(s["text"], s["finish_reason"]) is not None  # type: ignore[arg-type]
            for s in mine
        ) / len(mine)
        assert float(r["cut_rate"]) == pytest.approx(cut, abs=1e-4)
        assert float(r["format_rate"]) == pytest.approx(formatted, abs=1e-4)
        reward = sum(float(s["reward"]) for s in mine) / len(mine)
        assert float(r["reward"]) == pytest.approx(reward, abs=1e-5)
    assert "Collapsed nodes" in (folder / "summary.md").read_text()


def test_samples_csv_holds_sample_texts_completions_per_node_and_round(
    tmp_path: Path, load_model: Callable[[], BaseModel]  # noqa: F811
) -> None:
    config = _config(configs=(Sharing(1, 1),), eval_every=2, eval_tasks=4)
    assert config.sample_texts == 2
    folder = tmp_path / "run"
    assert run_experiment(config, folder, load_model=load_model, learner_class=AnsweringLearner)
    samples = _csv(folder / "samples.csv")
    assert len(samples) == config.rounds * config.nodes * 2
    assert {(s["round"], s["node"]) for s in samples} == {
        (str(r), str(n)) for r in range(config.rounds) for n in range(config.nodes)
    }
    evaluations = _csv(folder / "eval.csv")
    assert tuple(evaluations[0]) == EVAL_COLUMNS
    assert all(e["collapsed"] == str(int(float(e["format_rate"]) < 0.5)) for e in evaluations)
    summary = json.loads((folder / "summary.json").read_text())
    (collapse,) = summary["collapse"]
    assert collapse["heldout_round"] == 2 and collapse["heldout_nodes"] == config.nodes
    text = (folder / "summary.md").read_text()
    assert f"collapsed nodes: {collapse['heldout_collapsed']} of {config.nodes}" in text


# ------------------------------------------------------------------ collapse detection


def test_the_first_of_three_rounds_in_a_row_below_half() -> None:
    assert first_collapsed_round([0.6, 0.4, 0.4, 0.6, 0.4, 0.4, 0.4, 0.1]) == 4
    assert first_collapsed_round([0.4, 0.4, None, 0.4, 0.4]) is None  # unknown ends a run
    assert first_collapsed_round([0.5, 0.5, 0.5]) is None  # 0.5 is not below 0.5
    assert first_collapsed_round([0.0, 0.0]) is None


def _round_row(config: str, seed: int, node: int, round_: int, rate: str) -> dict[str, str]:
    return {"config": config, "seed": str(seed), "node": str(node), "round": str(round_),
            "format_rate": rate}  # fmt: skip


def _eval_row(config: str, seed: int, node: int, round_: int, rate: float) -> dict[str, str]:
    return {"config": config, "seed": str(seed), "node": str(node), "round": str(round_),
            "accuracy": "0.0", "format_rate": str(rate)}  # fmt: skip


def test_collapsed_nodes_per_configuration_from_rounds_and_the_last_evaluation() -> None:
    config = ExperimentConfig(
        nodes=2, rounds=5, configs=(Sharing(4, 0), Sharing(2, 2)), seeds=(0, 1)
    )
    healthy, falling = ["0.9"] * 5, ["0.9", "0.3", "0.2", "0.1", "0.4"]
    rows = [
        _round_row("4/0", s, n, k, healthy[k]) for s in (0, 1) for n in (0, 1) for k in range(5)
    ] + [
        _round_row("2/2", s, n, k, (falling if (s, n) == (1, 0) else healthy)[k])
        for s in (0, 1) for n in (0, 1) for k in range(5)
    ] + [_round_row("2/2", 7, 0, k, "0.0") for k in range(5)]  # fmt: skip  # seed 7: not asked
    collapses = round_collapses(config, rows)
    assert [(c.label, c.nodes, c.rounds_collapsed, c.first_round) for c in collapses] == [
        ("4/0", 4, 0, None),
        ("2/2", 4, 1, 1),
    ]
    assert collapses[1].first_rounds == {"0/0": None, "0/1": None, "1/0": 1, "1/1": None}

    evaluations = [_eval_row("4/0", s, n, 5, 0.8) for s in (0, 1) for n in (0, 1)]
    evaluations += [_eval_row("2/2", s, n, 0, 0.1) for s in (0, 1) for n in (0, 1)]  # earlier
    evaluations += [_eval_row("2/2", 0, n, 5, 0.9) for n in (0, 1)]
    evaluations += [_eval_row("2/2", 1, 0, 5, 0.2), _eval_row("2/2", 1, 1, 5, 0.5)]
    merged = heldout_collapses(config, collapses, evaluations)
    assert [(c.label, c.heldout_round, c.heldout_collapsed, c.heldout_nodes) for c in merged] == [
        ("4/0", 5, 0, 4),
        ("2/2", 5, 1, 4),
    ]
    text = collapse_markdown(merged)
    assert "- 2/2: collapsed nodes: 1 of 4 at the last evaluation (after 5 rounds); " in text
    assert "1 of 4 below it in their own samples 3 rounds in a row, the first from round 1" in text
    assert "- 4/0: collapsed nodes: 0 of 4" in text
    without = collapse_markdown(round_collapses(config, rows))
    assert "- 2/2: no evaluation; 1 of 4 below it" in without
    running = [e for e in evaluations if not (e["config"] == "4/0" and e["seed"] == "1")]
    running += [_eval_row("4/0", 1, n, 0, 0.8) for n in (0, 1)]  # seed 1 evaluated at round 0 only
    partial = collapse_markdown(heldout_collapses(config, round_collapses(config, rows), running))
    expected = "- 4/0: collapsed nodes: 0 of 4 at the last evaluation (after 0 to 5 rounds, by "
    expected += "seed)"
    assert expected in partial
    assert "- 2/2: collapsed nodes: 1 of 4 at the last evaluation (after 5 rounds); " in partial

