"""The run folder's files: ``rounds.csv`` (appended per round), ``summary.md``/``summary.json``,
``cumulative_reward.png`` and ``moving_average_reward.png``.

Cumulative reward of a configuration (as in the SAPO paper): the sum over rounds of the swarm's
mean reward per round (the mean over nodes of each node's mean reward on its own completions), so
its maximum is the number of rounds. Seeds are averaged. Intervals: a 95% t-interval over seeds
when there are at least two; always also a 95% bootstrap over nodes (nodes resampled within each
seed; for the gain, the same resample for the configuration and the baseline: node i has the same
task stream in both). Against the baseline, the difference in cumulative reward is also paired by
seed (same task streams, same initial adapters), with a t-interval over the per-seed differences:
the run-to-run spread that the bootstrap over nodes cannot see.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from node.experiment.config import ExperimentConfig
from node.round.report import RoundReport

COLUMNS = (
    "exchange",
    "config",
    "local_setting",
    "external_setting",
    "seed",
    "round",
    "node",
    "peer",
    "reward",
    "local_groups",
    "external_groups",
    "verified_peers",
    "rejected",
    "trained",
    "loss",
    "tasks_digest",
    "generate_s",
    "train_s",
    "busy_s",
    "provenance_s",  # recomputing peers' groups: as a seat and before training on them
    # training stability (node.round.report.RoundReport)
    "step_kind",
    "grad_norm",
    "kl",
    "peer_logprob_gap",
    "peer_ess",
    "peer_groups_dropped",
    "cut_rate",
    "format_rate",
)

SAMPLE_COLUMNS = (
    "exchange",
    "config",
    "seed",
    "round",
    "node",
    "reward",
    "finish_reason",
    "text",
)

EVAL_COLUMNS = (
    "exchange",
    "config",
    "seed",
    "round",  # rounds trained before the evaluation
    "node",
    "accuracy",
    "format_rate",
    "tasks",
    "seconds",
    "collapsed",  # 1 when format_rate < COLLAPSE_FORMAT_RATE
)

#: A node whose answers are in the strict format less often than this has collapsed: at an
#: evaluation (eval.csv), or in COLLAPSE_ROUNDS consecutive rounds of its own samples (rounds.csv).
COLLAPSE_FORMAT_RATE = 0.5
COLLAPSE_ROUNDS = 3

def _number(value: float | None, digits: int = 6) -> str:
    """A CSV cell: ``value`` to ``digits`` decimals, empty for None."""
    return "" if value is None else f"{value:.{digits}f}"


def _significant(value: float | None) -> str:
    """A CSV cell: ``value`` to 6 significant digits (a KL of 1e-7 stays visible), empty for
    None."""
    return "" if value is None else f"{value:.6g}"


def stability_cells(report: RoundReport) -> dict[str, str]:
    """The training-stability columns of a node's ``rounds.csv`` row (empty: not known)."""
    return {
        "step_kind": report.step_kind,
        "grad_norm": _significant(report.grad_norm),
        "kl": _significant(report.kl),
        "peer_logprob_gap": _significant(report.peer_logprob_gap),
        "peer_ess": _number(report.peer_ess, 4),
        "peer_groups_dropped": str(report.peer_groups_dropped),
        "cut_rate": _number(report.cut_rate, 4),
        "format_rate": _number(report.format_rate, 4),
    }


def sample_cells(report: RoundReport, count: int) -> list[dict[str, str]]:
    """The reward, finish reason and text of the node's first ``count`` own completions of the
    round (the first group's first, in order), for ``samples.csv``."""
    return [
        {
            "reward": f"{sample.reward:.6f}",
            "finish_reason": sample.finish_reason or "",
            "text": sample.text,
        }
        for sample in report.samples[:count]
    ]


# two-sided 95% Student t quantiles by degrees of freedom
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The two-sided 95% Student t interval of the mean of ``values``; ``None`` for fewer than 2."""
    if len(values) < 2:
        return None
    mean = float(np.mean(values))
    half = T95.get(len(values) - 1, 1.96) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return (mean - half, mean + half)


class RoundsCsv:
    """``rounds.csv``: one row per node per round, appended (and flushed) round by round (also
    ``eval.csv``, with ``EVAL_COLUMNS``, and ``samples.csv``, with ``SAMPLE_COLUMNS``).

    A file written by an older version lacks the columns added since: its rows read with those
    columns empty, and the first write rewrites it with the current header."""

    def __init__(self, path: Path, columns: Sequence[str] = COLUMNS) -> None:
        self.path = path
        self.columns = tuple(columns)

    def rows(self) -> list[dict[str, str]]:
        if not self.path.exists():
            return []
        with self.path.open(newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
        missing = [c for c in self.columns if c not in (reader.fieldnames or ())]
        for row in rows:
            row.update(dict.fromkeys(missing, ""))
        return rows

    def _upgrade(self) -> None:
        """Rewrites a file with an older header under the current one (new columns empty)."""
        if not self.path.exists():
            return
        with self.path.open(newline="") as f:
            header = next(csv.reader(f), None)
        if header is None or tuple(header) == self.columns:
            return
        # a line cut short by a kill is left out (keep() would drop it)
        self._rewrite([r for r in self.rows() if None not in r.values()])

    def _rewrite(self, rows: Sequence[dict[str, Any]]) -> None:
        """Replaces the file by ``rows`` under the current header, atomically."""
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        tmp.replace(self.path)

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        self._upgrade()
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            if new:
                writer.writeheader()
            writer.writerows(rows)
            f.flush()
            os.fsync(f.fileno())

    def keep(
        self, rounds_done: dict[tuple[str, int], int], *, complete_at_done: int = 0
    ) -> int:
        """Drops rows past each unit's completed rounds (a killed round); returns how many.

        With ``complete_at_done`` = n, rows of round ``rounds_done`` itself stay too when the
        unit has n whole rows of it (``eval.csv``: the evaluation after the last round done
        finished; a partial one is dropped, to be redone). Rows of a unit ``rounds_done`` does
        not name (run by an earlier invocation with other seeds or configurations) stay as they
        are: this invocation does not know how far that unit got."""
        rows = self.rows()
        whole = Counter(
            (r["config"], r["seed"], r["round"]) for r in rows if None not in r.values()
        )

        def wanted(r: dict[str, str]) -> bool:
            if None in r.values():  # a line cut short by a kill
                return False
            unit = (r["config"], int(r["seed"]))
            if unit not in rounds_done:
                return True
            done, round_ = rounds_done[unit], int(r["round"])
            if round_ == done and complete_at_done:
                return whole[(r["config"], r["seed"], r["round"])] == complete_at_done
            return round_ < done

        kept = [r for r in rows if wanted(r)]
        if len(kept) != len(rows):
            self._rewrite(kept)
        return len(rows) - len(kept)


@dataclass
class ConfigResult:
    """One configuration's numbers over the rounds every unit completed."""

    label: str
    seeds: int
    rounds: int
    cumulative: float  # mean over seeds of the sum over rounds of the swarm-mean reward
    seed_ci: tuple[float, float] | None
    node_ci: tuple[float, float]
    gain: float | None  # over the baseline, relative
    gain_ci: tuple[float, float] | None
    difference: float | None  # cumulative minus the baseline's, mean of the per-seed differences
    difference_ci: tuple[float, float] | None  # t-interval over those differences
    first: float  # mean reward of the first `window` rounds
    last: float  # and of the last `window` rounds
    local_groups: float  # groups trained on per node-round
    external_groups: float
    per_round: list[float]  # swarm-mean reward per round, averaged over seeds


def _reward_table(
    rows: Iterable[dict[str, str]],
) -> dict[str, dict[int, dict[int, dict[int, float]]]]:
    """config -> seed -> node -> round -> reward"""
    table: dict[str, dict[int, dict[int, dict[int, float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for r in rows:
        table[r["config"]][int(r["seed"])][int(r["node"])][int(r["round"])] = _reward(r)
    return table


def _reward(row: dict[str, str]) -> float:
    """A rounds.csv row's reward; 0.0 where the node had none (no own batch that round)."""
    return float(row["reward"]) if row["reward"] not in ("", "None") else 0.0


def summarize(
    config: ExperimentConfig, rows: list[dict[str, str]], *, resamples: int = 2000
) -> tuple[list[ConfigResult], int]:
    """Per configuration, over the rounds that every (configuration, seed) unit completed."""
    rows = [r for r in rows if int(r["seed"]) in config.seeds]
    table = _reward_table(rows)
    present = [c for c in config.configs if c.label in table]
    if not present:
        return [], 0
    seeds = sorted(set.intersection(*(set(table[c.label]) for c in present)))
    rounds = (
        min(len(table[c.label][s][n]) for c in present for s in seeds for n in table[c.label][s])
        if seeds
        else 0
    )
    if rounds == 0:
        return [], 0
    nodes = config.nodes

    def matrix(label: str, seed: int) -> np.ndarray:  # nodes x rounds
        return np.array(
            [[table[label][seed][n].get(r, 0.0) for r in range(rounds)] for n in range(nodes)]
        )

    rng = np.random.default_rng(0)
    picks = [rng.integers(0, nodes, size=(resamples, nodes)) for _ in seeds]

    def boot(label: str) -> np.ndarray:  # resampled cumulative rewards, averaged over seeds
        per_seed = [matrix(label, s).sum(axis=1)[p].mean(axis=1) for s, p in zip(seeds, picks)]
        return np.mean(per_seed, axis=0)

    base = config.baseline.label if config.baseline.label in table else present[0].label
    base_boot = boot(base)
    base_cums = np.array([matrix(base, s).mean(axis=0).sum() for s in seeds])
    base_cum = float(base_cums.mean())
    results = []
    window = max(1, min(config.window, rounds))
    for sharing in present:
        label = sharing.label
        per_seed = [matrix(label, s).mean(axis=0) for s in seeds]  # swarm mean per round
        cums = np.array([p.sum() for p in per_seed])
        mean_round = np.mean(per_seed, axis=0)
        b = boot(label)
        node_ci = (float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5)))
        difference = difference_ci = None
        if label != base:
            difference = float((cums - base_cums).mean())
            difference_ci = t_interval(cums - base_cums)
        gain = gain_ci = None
        if label != base and base_cum > 0:
            gain = float(cums.mean() / base_cum - 1)
            ratio = b / np.where(base_boot > 0, base_boot, np.nan) - 1
            gain_ci = (float(np.nanpercentile(ratio, 2.5)), float(np.nanpercentile(ratio, 97.5)))
        used = [
            r
            for r in rows
            if r["config"] == label and int(r["seed"]) in seeds and int(r["round"]) < rounds
        ]
        results.append(
            ConfigResult(
                label=label,
                seeds=len(seeds),
                rounds=rounds,
                cumulative=float(cums.mean()),
                seed_ci=t_interval(cums),
                node_ci=node_ci,
                gain=gain,
                gain_ci=gain_ci,
                difference=difference,
                difference_ci=difference_ci,
                first=float(mean_round[:window].mean()),
                last=float(mean_round[-window:].mean()),
                local_groups=float(np.mean([int(r["local_groups"]) for r in used])),
                external_groups=float(np.mean([int(r["external_groups"]) for r in used])),
                per_round=[float(x) for x in mean_round],
            )
        )
    return results, rounds


@dataclass
class EqualSteps:
    """One configuration at equal optimizer steps: every node run is compared over its rounds
    while it had taken at most ``steps`` optimizer steps, the fewest any node run took."""

    label: str
    steps_per_node: float  # optimizer steps per node over the compared rounds, mean
    steps: int  # S, the common number of steps
    reward: float  # mean own reward per round while at most S steps were taken, over node runs
    difference: float | None  # minus the baseline's, mean of the per-seed differences
    difference_ci: tuple[float, float] | None


def equal_steps(
    config: ExperimentConfig, rows: list[dict[str, str]], rounds: int
) -> list[EqualSteps]:
    """Each configuration's mean reward per round while its nodes had taken at most S optimizer
    steps (S: the fewest steps of any node run in the first ``rounds`` rounds), paired by seed
    against the baseline. A sharing node steps more often; this asks whether it learns more per
    step, not per round."""
    runs: dict[tuple[str, int, int], list[tuple[int, bool, float]]] = defaultdict(list)
    for r in rows:
        if int(r["seed"]) in config.seeds and int(r["round"]) < rounds:
            key = (r["config"], int(r["seed"]), int(r["node"]))
            runs[key].append((int(r["round"]), r["trained"] == "1", _reward(r)))
    if not runs:
        return []
    steps = min(sum(t for _, t, _ in run) for run in runs.values())
    by_config: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    totals: dict[str, list[int]] = defaultdict(list)
    for (label, seed, _), run in runs.items():
        by_config[label][seed].append(_reward_until_step(sorted(run), steps))
        totals[label].append(sum(t for _, t, _ in run))
    base = config.baseline.label if config.baseline.label in by_config else next(iter(by_config))
    base_means = {seed: float(np.mean(v)) for seed, v in by_config[base].items()}
    results = []
    for sharing in config.configs:
        if sharing.label not in by_config:
            continue
        means = {seed: float(np.mean(v)) for seed, v in by_config[sharing.label].items()}
        paired = [means[s] - base_means[s] for s in means if s in base_means]
        results.append(
            EqualSteps(
                label=sharing.label,
                steps_per_node=float(np.mean(totals[sharing.label])),
                steps=steps,
                reward=float(np.mean(list(means.values()))),
                difference=None if sharing.label == base or not paired else float(np.mean(paired)),
                difference_ci=None if sharing.label == base else t_interval(paired),
            )
        )
    return results


def _reward_until_step(run: list[tuple[int, bool, float]], steps: int) -> float:
    """Mean reward of a node run's rounds while it had taken at most ``steps`` optimizer steps
    (a round's reward is measured before that round's own step)."""
    taken, rewards = 0, []
    for _, trained, reward in run:
        if taken > steps:
            break
        rewards.append(reward)
        taken += trained
    return float(np.mean(rewards)) if rewards else 0.0


def equal_steps_markdown(results: Sequence[EqualSteps], config: ExperimentConfig) -> str:
    if not results:
        return ""
    lines = [
        "",
        f"At equal optimizer steps (S = {results[0].steps}, the fewest of any node run): mean "
        f"reward per round while each node had taken at most S steps, paired by seed against "
        f"{config.baseline.label}.",
        "",
        "| I/J | optimizer steps per node | mean reward, at most S steps | difference, paired by seed "
        "| its 95% CI over seeds |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        difference = "-" if r.difference is None else f"{r.difference:+.4f}"
        interval = _interval(r.difference_ci) if r.difference_ci else "-"
        lines.append(
            f"| {r.label} | {r.steps_per_node:.1f} | {r.reward:.4f} | {difference} | {interval} |"
        )
    return "\n".join(lines) + "\n"


@dataclass
class Collapse:
    """One configuration's collapsed nodes (format rate below ``COLLAPSE_FORMAT_RATE``), over
    every seed: at the last held-out evaluation, and in its own samples of ``COLLAPSE_ROUNDS``
    consecutive rounds (the cheaper detector, also without evaluations)."""

    label: str
    nodes: int  # node runs looked at: nodes x seeds with rows
    #: of them, with a round format rate below the threshold COLLAPSE_ROUNDS rounds in a row
    rounds_collapsed: int
    #: the first round (as in rounds.csv, from 0) of the earliest such run of rounds, per
    #: "seed/node"; None for a node that did not collapse
    first_rounds: dict[str, int | None]
    heldout_round: int | None = None  # rounds trained before the last evaluation (None: none)
    heldout_earliest: int | None = None  # the same in the seed evaluated least far (partial runs)
    heldout_nodes: int = 0  # node runs evaluated then
    heldout_collapsed: int = 0  # of them, with a held-out format rate below the threshold

    @property
    def first_round(self) -> int | None:
        rounds = [r for r in self.first_rounds.values() if r is not None]
        return min(rounds) if rounds else None


def first_collapsed_round(
    format_rates: Sequence[float | None],
    *,
    threshold: float = COLLAPSE_FORMAT_RATE,
    run: int = COLLAPSE_ROUNDS,
) -> int | None:
    """The index of the first of ``run`` consecutive rates below ``threshold``; None if there
    is no such run. An unknown rate (None) ends a run."""
    streak = 0
    for index, rate in enumerate(format_rates):
        streak = streak + 1 if rate is not None and rate < threshold else 0
        if streak == run:
            return index - run + 1
    return None


def _rate(text: str | None) -> float | None:
    return float(text) if text not in (None, "", "None") else None


def round_collapses(config: ExperimentConfig, rows: Iterable[dict[str, str]]) -> list[Collapse]:
    """Per configuration, the nodes whose round format rate (``rounds.csv``) stays below the
    threshold for ``COLLAPSE_ROUNDS`` rounds in a row; rows without format rates (a run folder of
    an older version) collapse nothing."""
    rates: dict[str, dict[tuple[int, int], dict[int, float | None]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for r in rows:
        if int(r["seed"]) in config.seeds:
            node = (int(r["seed"]), int(r["node"]))
            rates[r["config"]][node][int(r["round"])] = _rate(r.get("format_rate"))
    found = []
    for label in (c.label for c in config.configs):
        if label not in rates:
            continue
        firsts: dict[str, int | None] = {}
        for (seed, node), by_round in sorted(rates[label].items()):
            series = [by_round.get(k) for k in range(max(by_round) + 1)]
            firsts[f"{seed}/{node}"] = first_collapsed_round(series)
        collapsed = sum(r is not None for r in firsts.values())
        found.append(Collapse(label, len(firsts), collapsed, firsts))
    return found


def collapse_markdown(collapses: Sequence[Collapse]) -> str:
    if not collapses:
        return ""
    lines = [
        "",
        f"Collapsed nodes (strict answer format in fewer than {COLLAPSE_FORMAT_RATE:.0%} of "
        "answers):",
        "",
    ]
    for c in collapses:
        after = f"{c.heldout_round} rounds"
        if c.heldout_earliest is not None and c.heldout_earliest != c.heldout_round:
            after = f"{c.heldout_earliest} to {c.heldout_round} rounds, by seed"
        heldout = (
            f"collapsed nodes: {c.heldout_collapsed} of {c.heldout_nodes} at the last "
            f"evaluation (after {after})"
            if c.heldout_round is not None
            else "no evaluation"
        )
        first = "" if c.first_round is None else f", the first from round {c.first_round}"
        lines.append(
            f"- {c.label}: {heldout}; {c.rounds_collapsed} of {c.nodes} below it in their own "
            f"samples {COLLAPSE_ROUNDS} rounds in a row{first}"
        )
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _gain(result: ConfigResult, config: ExperimentConfig) -> str:
    if result.gain is not None:
        return _pct(result.gain)
    return "baseline" if result.label == config.baseline.label else "n/a (baseline 0)"


def _difference(result: ConfigResult, seeds: int) -> str:
    if result.difference is None:
        return "baseline | -"
    ci = _interval(result.difference_ci) if result.difference_ci else f"n/a ({seeds} seed)"
    return f"{result.difference:+.2f} | {ci}"


def _interval(ci: tuple[float, float] | None, pct: bool = False) -> str:
    if ci is None:
        return "n/a"
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]" if pct else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


_PEER_SETTINGS = (
    "peer_weight",
    "peers_only_steps",
    "peer_logprob_gap",
    "peer_importance",
    "peer_importance_cap",
    "peer_advantage",
)


def _peer_settings(config: ExperimentConfig) -> str:
    """The peer-weighting settings that differ from the defaults (else says there are none)."""
    default = ExperimentConfig()
    changed = [
        f"{name} {getattr(config, name)}"
        for name in _PEER_SETTINGS
        if getattr(config, name) != getattr(default, name)
    ]
    return ", ".join(changed) if changed else "peer settings at their defaults"


def _tasks_line(config: ExperimentConfig) -> str:
    """What a node answers per round: n tasks, or I of an I/J configuration (paper accounting)."""
    if config.accounting == "paper":
        return "I tasks (paper accounting: an I/J node answers I)"
    return f"{config.tasks_per_round} tasks"


def summary_markdown(
    config: ExperimentConfig, results: list[ConfigResult], rounds: int, complete: bool
) -> str:
    seeds = results[0].seeds if results else 0
    lines = [
        f"exchange: **{config.exchange}** "
        + (
            "(Anvil + coordinator contract + local content store + verification + committees)"
            if config.exchange == "chain"
            else "(in-process: same tasks, generation, verification, selection and GRPO step; "
            "no chain, no store)"
        ),
        f"model {config.model}, preset {config.preset}, {config.nodes} nodes, "
        f"{_tasks_line(config)} x G={config.group_size} per node-round, "
        f"max {config.max_new_tokens} new tokens, lr {config.lr}, LoRA r{config.lora_rank} "
        f"({config.lora_targets}), KL beta {config.beta}, {_peer_settings(config)}, "
        f"seeds {', '.join(map(str, config.seeds))}",
        f"rounds compared: {rounds} of {config.rounds}"
        + ("" if complete else " (PARTIAL: the run has not finished every unit)"),
        "",
        "| I/J | cumulative reward | 95% CI over seeds | 95% CI, bootstrap over nodes "
        f"| gain vs {config.baseline.label} | gain 95% CI (bootstrap over nodes) "
        f"| difference vs {config.baseline.label}, paired by seed | its 95% CI over seeds "
        f"| mean reward, first {min(config.window, rounds)} rounds | last {min(config.window, rounds)} "
        "| groups used per node-round (local + external) |",
        "| --- | ---: | --- | --- | ---: | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.label} | {r.cumulative:.2f} | "
            + (_interval(r.seed_ci) if r.seed_ci else f"n/a ({seeds} seed)")
            + f" | {_interval(r.node_ci)} | {_gain(r, config)} | "
            f"{_interval(r.gain_ci, pct=True) if r.gain is not None else '-'} | "
            + _difference(r, seeds)
            + f" | {r.first:.3f} | {r.last:.3f} | {r.local_groups:.2f} + {r.external_groups:.2f} |"
        )
    lines += [
        "",
        "Cumulative reward = sum over rounds of the swarm's mean reward per round (mean over "
        "nodes of each node's mean reward on its own completions); maximum = rounds.",
    ]
    return "\n".join(lines) + "\n"


def write_summary(
    folder: Path, config: ExperimentConfig, rows: list[dict[str, str]], complete: bool
) -> list[ConfigResult]:
    from node.experiment.heldout_report import heldout_collapses, write_heldout  # imports this

    results, rounds = summarize(config, rows)
    eval_rows = RoundsCsv(folder / "eval.csv", EVAL_COLUMNS).rows()
    collapses = heldout_collapses(config, round_collapses(config, rows), eval_rows)
    at_equal_steps = equal_steps(config, rows, rounds)
    (folder / "summary.md").write_text(
        summary_markdown(config, results, rounds, complete)
        + equal_steps_markdown(at_equal_steps, config)
        + collapse_markdown(collapses)
    )
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "exchange": config.exchange,
                "complete": complete,
                "rounds": rounds,
                "config": config.to_json(),
                "results": [r.__dict__ for r in results],
                "equal_steps": [r.__dict__ for r in at_equal_steps],
                "collapse": [
                    {**c.__dict__, "first_round": c.first_round} for c in collapses
                ],
            },
            indent=2,
        )
        + "\n"
    )
    plot(folder, config, results)
    write_heldout(folder, config)
    return results


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over up to ``window`` values (shorter at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot(folder: Path, config: ExperimentConfig, results: list[ConfigResult]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    title = (
        f"{config.model}, {config.nodes} nodes, {config.preset}, "
        f"{_tasks_line(config)} x G={config.group_size}, {config.exchange} exchange"
    )
    for name, ylabel, series in (
        ("cumulative_reward.png", "cumulative reward", lambda r: np.cumsum(r.per_round)),
        (
            "moving_average_reward.png",
            f"mean reward, moving average over {config.window} rounds",
            lambda r: moving_average(r.per_round, config.window),
        ),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
        for r in results:
            xs = np.arange(1, len(r.per_round) + 1)
            ax.plot(xs, series(r), label=f"I/J = {r.label}", linewidth=1.8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(folder / name)
        plt.close(fig)
