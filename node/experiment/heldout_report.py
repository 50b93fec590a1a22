"""The held-out evaluations of an experiment (``eval.csv``): curves and paired intervals.

For each configuration and evaluation round: the accuracy and format rate averaged over the
nodes, then over seeds, and the lowest and highest single node (nodes of one swarm can part
ways). Against the baseline configuration (J = 0) the comparison is paired by
seed (same task streams, same initial adapters): the per-seed difference of the swarm-mean
accuracy, with a two-sided 95 % Student t interval over seeds (none with one seed). Besides each
round: the mean over the evaluations after round 0 (the area under the curve, per evaluation),
which says how fast a configuration learned as well as how far it got, paired the same way.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.experiment.config import ExperimentConfig
from node.experiment.outputs import (
    COLLAPSE_FORMAT_RATE,
    EVAL_COLUMNS,
    Collapse,
    RoundsCsv,
    t_interval,
)


@dataclass(frozen=True)
class HeldOutPoint:
    """One configuration at one evaluation round."""

    config: str
    round: int
    seeds: int
    accuracy: float
    format_rate: float
    node_range: tuple[float, float]  # lowest and highest accuracy of a single node, any seed
    difference: float | None  # accuracy minus the baseline's, mean over seeds
    difference_ci: tuple[float, float] | None


@dataclass(frozen=True)
class HeldOutMean:
    """One configuration's held-out accuracy averaged over its evaluations after round 0, in
    the seeds evaluated at every one of them (a seed still running is left out)."""

    config: str
    rounds: tuple[int, ...]
    seeds: int
    accuracy: float
    difference: float | None  # minus the baseline's mean over the same rounds, mean over seeds
    difference_ci: tuple[float, float] | None


Swarm = dict[tuple[str, int, int], list[tuple[float, float]]]  # (config, seed, round): nodes'


def _swarm(rows: Iterable[dict[str, str]]) -> Swarm:
    """Each node's (accuracy, format rate), by configuration, seed and round."""
    swarm: Swarm = defaultdict(list)
    for row in rows:
        key = (row["config"], int(row["seed"]), int(row["round"]))
        swarm[key].append((float(row["accuracy"]), float(row["format_rate"])))
    return swarm


def heldout_points(config: ExperimentConfig, rows: Iterable[dict[str, str]]) -> list[HeldOutPoint]:
    """Every (configuration, round) evaluated in every seed of that configuration."""
    swarm = _swarm(rows)
    means = {k: tuple(statistics.fmean(x) for x in zip(*v)) for k, v in swarm.items()}
    baseline = config.baseline.label
    points = []
    for label in [c.label for c in config.configs]:
        rounds = sorted({r for (c, _, r) in means if c == label})
        for round_ in rounds:
            seeds = sorted(s for (c, s, r) in means if c == label and r == round_)
            accuracy = statistics.fmean(means[(label, s, round_)][0] for s in seeds)
            format_rate = statistics.fmean(means[(label, s, round_)][1] for s in seeds)
            paired = [
                means[(label, s, round_)][0] - means[(baseline, s, round_)][0]
                for s in seeds
                if (baseline, s, round_) in means
            ]
            difference, ci = None, None
            if label != baseline and paired:
                difference, ci = statistics.fmean(paired), t_interval(paired)
            single = [a for s in seeds for a, _ in swarm[(label, s, round_)]]
            spread = (min(single), max(single))
            points.append(
                HeldOutPoint(
                    label, round_, len(seeds), accuracy, format_rate, spread, difference, ci
                )
            )
    return points


def heldout_means(config: ExperimentConfig, rows: Iterable[dict[str, str]]) -> list[HeldOutMean]:
    """Each configuration's mean accuracy over its evaluations after round 0, per seed; paired
    by seed against the baseline over the same rounds."""
    accuracy = {k: statistics.fmean(a for a, _ in v) for k, v in _swarm(rows).items()}
    baseline = config.baseline.label
    found = []
    for label in [c.label for c in config.configs]:
        rounds = tuple(sorted({r for (c, _, r) in accuracy if c == label and r > 0}))
        per_seed = {
            s: statistics.fmean(accuracy[(label, s, r)] for r in rounds)
            for s in sorted({s for (c, s, _) in accuracy if c == label})
            if rounds and all((label, s, r) in accuracy for r in rounds)
        }
        if not per_seed:
            continue
        paired = [
            value - statistics.fmean(accuracy[(baseline, s, r)] for r in rounds)
            for s, value in per_seed.items()
            if all((baseline, s, r) in accuracy for r in rounds)
        ]
        difference, ci = None, None
        if label != baseline and paired:
            difference, ci = statistics.fmean(paired), t_interval(paired)
        mean = statistics.fmean(per_seed.values())
        found.append(HeldOutMean(label, rounds, len(per_seed), mean, difference, ci))
    return found


def heldout_collapses(
    config: ExperimentConfig, collapses: list[Collapse], rows: Iterable[dict[str, str]]
) -> list[Collapse]:
    """``collapses`` (one per configuration, from the rounds) with each configuration's nodes
    whose held-out format rate is below the threshold at its last evaluation: each seed's
    latest evaluation round, counted over the seeds (``heldout_round``: the latest of them;
    ``heldout_earliest``: the earliest, below it while a seed is still running)."""
    latest: dict[tuple[str, int], int] = {}
    evaluated: list[tuple[str, int, int, float]] = []
    for row in rows:
        if int(row["seed"]) not in config.seeds:
            continue
        label, seed, round_ = row["config"], int(row["seed"]), int(row["round"])
        latest[(label, seed)] = max(latest.get((label, seed), -1), round_)
        evaluated.append((label, seed, round_, float(row["format_rate"])))
    by_label = {c.label: c for c in collapses}
    for label in (c.label for c in config.configs):
        last = [(s, r) for (c, s), r in latest.items() if c == label]
        if not last:
            continue
        found = by_label.setdefault(label, Collapse(label, 0, 0, {}))
        rates = [f for (c, s, r, f) in evaluated if c == label and (s, r) in last]
        found.heldout_round = max(r for _, r in last)
        found.heldout_earliest = min(r for _, r in last)
        found.heldout_nodes = len(rates)
        found.heldout_collapsed = sum(f < COLLAPSE_FORMAT_RATE for f in rates)
    order = {c.label: k for k, c in enumerate(config.configs)}
    return sorted(by_label.values(), key=lambda c: order.get(c.label, len(order)))


def heldout_markdown(
    config: ExperimentConfig, points: list[HeldOutPoint], means: Sequence[HeldOutMean] = ()
) -> str:
    """A table: accuracy (format rate) per configuration per round, differences paired; then
    the means over the evaluations after round 0."""
    if not points:
        return ""
    lines = [
        f"\n## Held-out accuracy ({config.eval_tasks} tasks, greedy, every "
        f"{config.eval_every} rounds)\n",
        f"| round | config | seeds | accuracy | single nodes | format rate | "
        f"vs {config.baseline.label} (paired by seed) | 95% CI over seeds |",
        "| ---: | --- | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    order = {c.label: k for k, c in enumerate(config.configs)}
    for p in sorted(points, key=lambda p: (p.round, order.get(p.config, len(order)))):
        lines.append(
            f"| {p.round} | {p.config} | {p.seeds} | {p.accuracy:.3f} | "
            f"{p.node_range[0]:.3f}-{p.node_range[1]:.3f} | {p.format_rate:.2f} | "
            f"{_signed(p.difference)} | {_interval(p.difference_ci)} |"
        )
    if means:
        lines += [
            (
                "\nMean over the evaluations after round 0 (the area under the curve, per "
                "evaluation), in the seeds evaluated at all of them:\n"
            ),
            (
                f"| config | rounds | seeds | mean accuracy | vs {config.baseline.label} (paired "
                "by seed) | 95% CI over seeds |"
            ),
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
        for m in means:
            lines.append(
                f"| {m.config} | {m.rounds[0]}-{m.rounds[-1]} ({len(m.rounds)}) | {m.seeds} | "
                f"{m.accuracy:.3f} | {_signed(m.difference)} | {_interval(m.difference_ci)} |"
            )
    return "\n".join(lines) + "\n"


def _signed(difference: float | None) -> str:
    return "baseline" if difference is None else f"{difference:+.3f}"


def _interval(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def write_heldout(folder: Path, config: ExperimentConfig) -> list[HeldOutPoint]:
    """Appends the held-out table to summary.md and plots heldout_accuracy.png and, with a
    paired interval, heldout_difference.png (if evaluated)."""
    rows = RoundsCsv(folder / "eval.csv", EVAL_COLUMNS).rows()
    points = heldout_points(config, rows)
    if not points:
        return points
    with (folder / "summary.md").open("a") as f:
        f.write(heldout_markdown(config, points, heldout_means(config, rows)))
    _plot(folder, config, points)
    _plot_differences(folder, config, points)
    return points


def _curves(
    axis: Any,
    config: ExperimentConfig,
    points: list[HeldOutPoint],
    value: Callable[[HeldOutPoint], tuple[Any, Any]],
    alpha: float,
) -> None:
    """One line per configuration over its rounds, with a band; ``value``: (y, (low, high))."""
    for label in [c.label for c in config.configs]:
        mine = sorted((p for p in points if p.config == label), key=lambda p: p.round)
        if mine:
            rounds = [p.round for p in mine]
            ys, bands = zip(*(value(p) for p in mine), strict=True)
            line = axis.plot(rounds, ys, marker="o", label=label)[0]
            lows, highs = zip(*bands, strict=True)
            axis.fill_between(rounds, lows, highs, color=line.get_color(), alpha=alpha)


def _plot(folder: Path, config: ExperimentConfig, points: list[HeldOutPoint]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    _curves(axis, config, points, lambda p: (p.accuracy, p.node_range), alpha=0.12)
    axis.set_xlabel("rounds trained")
    axis.set_ylabel("held-out accuracy (mean over nodes and seeds;\nband: single nodes)")
    axis.set_title(f"{config.model}, {config.preset}: greedy, {config.eval_tasks} tasks")
    axis.legend(title="I/J")
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(folder / "heldout_accuracy.png", dpi=120)
    plt.close(figure)


def _plot_differences(folder: Path, config: ExperimentConfig, points: list[HeldOutPoint]) -> None:
    """Each configuration's paired difference to the baseline per round, with its 95 % band."""
    paired = [p for p in points if p.difference_ci is not None]
    if not paired:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    axis.axhline(0.0, color="black", linewidth=0.8)
    _curves(axis, config, paired, lambda p: (p.difference, p.difference_ci), alpha=0.15)
    seeds = max(p.seeds for p in paired)
    axis.set_xlabel("rounds trained")
    baseline = config.baseline.label
    axis.set_ylabel(f"held-out accuracy minus {baseline}'s\n(paired by seed; band: 95 %)")
    axis.set_title(f"{config.model}, {config.preset}: {seeds} seeds, {config.eval_tasks} tasks")
    axis.legend(title="I/J")
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(folder / "heldout_difference.png", dpi=120)
    plt.close(figure)
