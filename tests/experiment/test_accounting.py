"""The paper's accounting (an I/J node answers I tasks) and the comparison at equal optimizer
steps (node.experiment.config, node.experiment.outputs)."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from node.experiment.config import ExperimentConfig, Sharing, Unit
from node.experiment.outputs import equal_steps, equal_steps_markdown
from node.experiment.runner import run_experiment
from node.policy.model import BaseModel
from tests.experiment.test_experiment import _config, load_model  # noqa: F401 (a fixture)
from tests.integration.swarm import AnsweringLearner

pytestmark = pytest.mark.timeout(120)


def test_paper_accounting_gives_an_i_j_node_i_tasks(tmp_path: Path) -> None:
    config = ExperimentConfig(configs=(Sharing(4, 0), Sharing(2, 2)), accounting="paper")
    assert [config.batch_shape(c) for c in config.configs] == [(4, 8), (2, 8)]
    node = config.node_config(Unit(Sharing(2, 2), 0), 0, tmp_path)
    assert node.tasks.tasks_per_round == 2 and node.sampling.local_groups == 2
    swarm = ExperimentConfig(configs=(Sharing(4, 0), Sharing(2, 2)), tasks_per_round=4)
    assert {swarm.batch_shape(c) for c in swarm.configs} == {(4, 8)}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"accounting": "paper", "configs": (Sharing(4, 0), Sharing(0, 4))}, "I = 0"),
        ({"accounting": "papers"}, "accounting 'papers': one of swarm, paper"),
    ],
)
def test_bad_accounting_is_refused(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**settings)


def test_a_tiny_paper_accounting_run_answers_i_tasks_per_node(
    tmp_path: Path, load_model: Callable[[], BaseModel]  # noqa: F811
) -> None:
    config = _config(
        configs=(Sharing(2, 0), Sharing(1, 1)), accounting="paper", sample_texts=100
    )
    folder = tmp_path / "run"
    assert run_experiment(config, folder, load_model=load_model, learner_class=AnsweringLearner)
    with (folder / "samples.csv").open(newline="") as handle:
        per_node_round = Counter((s["config"], s["round"], s["node"]) for s in csv.DictReader(handle))
    expected = {"2/0": 2 * config.group_size, "1/1": 1 * config.group_size}
    assert {(c, n) for (c, _, _), n in per_node_round.items()} == set(expected.items())
    assert "paper accounting" in (folder / "summary.md").read_text()


def row(config: str, seed: int, node: int, round: int, trained: bool, reward: float) -> dict:
    return {
        "config": config,
        "seed": str(seed),
        "node": str(node),
        "round": str(round),
        "trained": "1" if trained else "0",
        "reward": repr(reward),
    }


def test_equal_steps_compares_rewards_at_the_same_number_of_steps() -> None:
    """4/0 steps every other round, 2/2 every round: S = 2, the fewest steps of any node run
    over 4 rounds. Each run's rewards count while it had taken at most 2 steps."""
    config = ExperimentConfig(configs=(Sharing(4, 0), Sharing(2, 2)), seeds=(0, 1), nodes=2)
    solo_rewards = [0.1, 0.2, 0.3, 0.4]
    shared_rewards = {0: [0.1, 0.3, 0.5, 0.9], 1: [0.2, 0.2, 0.2, 0.9]}
    rows = []
    for seed in (0, 1):
        for r in range(4):
            rows.append(row("4/0", seed, 0, r, trained=r % 2 == 1, reward=solo_rewards[r]))
            rows.append(row("2/2", seed, 0, r, trained=True, reward=shared_rewards[seed][r]))
    solo, shared = equal_steps(config, rows, rounds=4)
    assert solo.steps == shared.steps == 2
    assert (solo.steps_per_node, shared.steps_per_node) == (2.0, 4.0)
    # 4/0 had taken at most 2 steps in all 4 rounds; 2/2 in rounds 0-2 (0, 1, 2 steps before)
    assert solo.reward == pytest.approx(0.25)
    assert shared.reward == pytest.approx((0.3 + 0.2) / 2)
    assert solo.difference is None
    assert shared.difference == pytest.approx(0.25 - 0.25)
    assert shared.difference_ci is not None  # two seeds: a t-interval
    table = equal_steps_markdown([solo, shared], config)
    assert "S = 2" in table and "| 2/2 | 4.0 | 0.2500 | +0.0000 |" in table
