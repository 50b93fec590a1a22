"""The held-out table: means over nodes then seeds, differences paired by seed."""

from __future__ import annotations

import pytest

from node.experiment.config import ExperimentConfig, Sharing
from node.experiment.heldout_report import heldout_markdown, heldout_means, heldout_points


def _row(config: str, seed: int, round_: int, node: int, accuracy: float) -> dict[str, str]:
    return {
        "config": config, "seed": str(seed), "round": str(round_), "node": str(node),
        "accuracy": str(accuracy), "format_rate": "1.0",
    }  # fmt: skip


def test_differences_are_paired_by_seed() -> None:
    config = ExperimentConfig(
        configs=(Sharing(4, 0), Sharing(2, 2)), seeds=(0, 1, 2), eval_every=10
    )
    base = {0: 0.2, 1: 0.5, 2: 0.3}  # seeds differ a lot; the pairing removes it
    rows = [
        _row("4/0", s, 10, n, base[s] + (0.01 if n else -0.01)) for s in base for n in (0, 1)
    ] + [_row("2/2", s, 10, n, base[s] + 0.05 + 0.01 * s) for s in base for n in (0, 1)]
    points = {p.config: p for p in heldout_points(config, rows)}
    assert points["4/0"].accuracy == pytest.approx(sum(base.values()) / 3)
    assert points["4/0"].difference is None
    shared = points["2/2"]
    assert shared.seeds == 3 and shared.difference == pytest.approx(0.06)
    low, high = shared.difference_ci  # type: ignore[misc]
    assert low == pytest.approx(0.06 - 4.303 * 0.01 / 3**0.5)  # t(2), sd of (0.05, 0.06, 0.07)
    assert high == pytest.approx(0.06 + 4.303 * 0.01 / 3**0.5)
    assert points["4/0"].node_range == pytest.approx((0.19, 0.51))  # every node of every seed
    assert shared.node_range == pytest.approx((0.25, 0.56))
    table = heldout_markdown(config, list(points.values()))
    assert "| 10 | 2/2 | 3 | 0.393 | 0.250-0.560 | 1.00 | +0.060 |" in table
    assert table.index("| 10 | 4/0 |") < table.index("| 10 | 2/2 |")  # the experiment's order


def test_a_single_seed_has_no_interval() -> None:
    config = ExperimentConfig(configs=(Sharing(4, 0), Sharing(2, 2)), seeds=(0,), eval_every=5)
    rows = [_row("4/0", 0, 0, 0, 0.3), _row("2/2", 0, 0, 0, 0.4)]
    shared = next(p for p in heldout_points(config, rows) if p.config == "2/2")
    assert shared.difference == pytest.approx(0.1) and shared.difference_ci is None


def test_the_mean_over_evaluations_is_paired_and_leaves_out_a_seed_still_running() -> None:
    config = ExperimentConfig(
        configs=(Sharing(4, 0), Sharing(2, 2)), seeds=(0, 1, 2), eval_every=10
    )
    base = {0: 0.2, 1: 0.5, 2: 0.3}
    gain = {10: 0.10, 20: 0.02}  # ahead early, nearly level later: the mean keeps both
    rows = [_row(c, s, 0, 0, 0.25) for c in ("4/0", "2/2") for s in base]  # before training
    rows += [_row("4/0", s, r, 0, base[s] + r / 100) for s in base for r in gain]
    rows += [_row("2/2", s, r, 0, base[s] + r / 100 + gain[r]) for s in (0, 1) for r in gain]
    rows.append(_row("2/2", 2, 10, 0, 0.9))  # seed 2's 2/2 has not reached round 20 yet
    means = {m.config: m for m in heldout_means(config, rows)}
    assert means["4/0"].rounds == (10, 20) and means["4/0"].seeds == 3
    assert means["4/0"].accuracy == pytest.approx(sum(base.values()) / 3 + 0.15)
    shared = means["2/2"]
    assert (shared.seeds, shared.difference) == (2, pytest.approx(0.06))
    assert shared.difference_ci == pytest.approx((0.06, 0.06))  # the same gain in both seeds
    table = heldout_markdown(config, heldout_points(config, rows), list(means.values()))
    assert "| 2/2 | 10-20 (2) | 2 | 0.560 | +0.060 | [+0.060, +0.060] |" in table
    assert "| 4/0 | 10-20 (2) | 3 | 0.483 | baseline | - |" in table
