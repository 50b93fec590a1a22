"""The cumulative-reward table: means over seeds, the difference to the baseline paired by seed."""

from __future__ import annotations

import pytest

from node.experiment.config import ExperimentConfig, Sharing
from node.experiment.outputs import summarize, summary_markdown

BASE = {0: 0.2, 1: 0.5, 2: 0.3}  # seeds differ a lot; the pairing removes it


def _row(config: str, seed: int, round_: int, node: int, reward: float) -> dict[str, str]:
    return {
        "config": config, "seed": str(seed), "round": str(round_), "node": str(node),
        "reward": str(reward), "local_groups": "1", "external_groups": "0",
    }  # fmt: skip


def _rows(seeds: tuple[int, ...]) -> list[dict[str, str]]:
    rows = []
    for s in seeds:
        for round_ in (0, 1):
            for node in (0, 1):
                spread = 0.01 if node else -0.01  # nodes differ, their mean is BASE[s]
                rows.append(_row("4/0", s, round_, node, BASE[s] + spread))
                rows.append(_row("2/2", s, round_, node, BASE[s] + 0.05 + 0.01 * s + spread))
    return rows


def test_the_difference_to_the_baseline_is_paired_by_seed() -> None:
    config = ExperimentConfig(
        nodes=2, rounds=2, configs=(Sharing(4, 0), Sharing(2, 2)), seeds=(0, 1, 2)
    )
    results, rounds = summarize(config, _rows((0, 1, 2)), resamples=50)
    assert rounds == 2
    base, shared = results
    assert base.cumulative == pytest.approx(2 * sum(BASE.values()) / 3)
    assert base.difference is None and base.difference_ci is None
    # per seed: 2 rounds x (0.05, 0.06, 0.07) = 0.10, 0.12, 0.14; t(2) interval over them
    assert shared.difference == pytest.approx(0.12)
    half = 4.303 * 0.02 / 3**0.5
    assert shared.difference_ci == pytest.approx((0.12 - half, 0.12 + half))
    # unpaired, the seeds' spread swamps the same difference
    assert shared.seed_ci is not None and shared.seed_ci[0] < base.cumulative
    assert shared.seed_ci[1] - shared.seed_ci[0] > 10 * 2 * half
    table = summary_markdown(config, results, rounds, complete=True)
    row = {line.split(" | ")[0]: line for line in table.splitlines() if line.startswith("| ")}
    assert "| baseline | - |" in row["| 4/0"]
    assert "| +0.12 | [0.07, 0.17] |" in row["| 2/2"]


def test_a_single_seed_has_a_difference_but_no_interval() -> None:
    config = ExperimentConfig(nodes=2, rounds=2, configs=(Sharing(4, 0), Sharing(2, 2)))
    results, rounds = summarize(config, _rows((0,)), resamples=50)
    assert results[1].difference == pytest.approx(0.10) and results[1].difference_ci is None
    assert "| +0.10 | n/a (1 seed) |" in summary_markdown(config, results, rounds, complete=True)
