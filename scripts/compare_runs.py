"""Compare configurations across experiment run folders, paired by seed.

``swarm experiment`` compares the configurations of one run folder. A short paired run often
changes one setting of the sharing configuration only (the J = 0 baseline does not depend on how
peers' groups are weighted), so its folder holds just that configuration; this script puts it
beside the baseline of another folder. Every folder must use the same seeds, nodes, rounds and
task streams (an in-process run of the same code and preset: checked from each folder's
``tasks_digest`` column).

    .venv/bin/python scripts/compare_runs.py BASELINE_DIR:4/0 RUN_DIR:2/2 OTHER_DIR:2/2

``--other-tasks`` drops the check, for the paper's accounting, whose I/J nodes answer the first I
of the baseline's tasks. Prints, per run, the cumulative reward (sum over rounds of the swarm's mean reward per round),
the last held-out accuracy (mean over nodes) and collapsed nodes, and each one's difference to the
first, paired by seed, with a 95% t interval over seeds. ``--learning`` adds how each run
learned, from the per-round columns of ``rounds.csv`` (a run written before a column existed
shows ``-``): optimizer steps per node, the share of node-rounds by step kind, the gradient norm
before clipping, the peers' log-prob gap and effective sample size, peers' groups dropped, and
the held-out accuracy averaged over every evaluation after round 0 (paired).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from node.experiment.outputs import COLLAPSE_FORMAT_RATE, t_interval  # noqa: E402


@dataclass(frozen=True)
class Run:
    """One configuration of one run folder: per seed, the swarm's mean reward per round and the
    held-out evaluations."""

    name: str
    rewards: dict[int, dict[int, float]]  # seed -> round -> mean reward over nodes
    evals: dict[int, dict[int, list[tuple[float, float]]]]  # seed -> round -> (accuracy, format)
    tasks: dict[tuple[int, int, int], str]  # (seed, round, node) -> tasks digest
    rows: list[dict[str, str]]  # this configuration's rows of rounds.csv

    def finished(self, seed: int) -> int:
        """Rounds 0..k-1 all present for ``seed``: k."""
        rounds = self.rewards.get(seed, {})
        return next(k for k in range(len(rounds) + 1) if k not in rounds)


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def load_run(spec: str) -> Run:
    """``FOLDER:I/J``: that configuration's rows of the folder."""
    folder, _, label = spec.rpartition(":")
    rows = [r for r in _rows(Path(folder) / "rounds.csv") if r["config"] == label]
    if not rows:
        raise SystemExit(f"{spec}: no rows of configuration {label!r} in {folder}/rounds.csv")
    by_round: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    tasks = {}
    for r in rows:
        seed, round = int(r["seed"]), int(r["round"])
        by_round[seed][round].append(float(r["reward"] or 0.0))
        tasks[(seed, round, int(r["node"]))] = r["tasks_digest"]
    rewards = {
        seed: {round: sum(v) / len(v) for round, v in rounds.items()}
        for seed, rounds in by_round.items()
    }
    evals: dict[int, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in _rows(Path(folder) / "eval.csv"):
        if r["config"] == label:
            entry = (float(r["accuracy"]), float(r["format_rate"]))
            evals[int(r["seed"])][int(r["round"])].append(entry)
    return Run(spec, rewards, evals, tasks, rows)


def compare(runs: list[Run], *, rounds: int | None = None, same_tasks: bool = True) -> list[str]:
    """Lines of the comparison table; the first run is the baseline. Every run is taken over the
    seeds all runs have and the rounds all of them finished (at most ``rounds``); held-out
    accuracy at the last evaluation round all runs have for a seed, within those rounds.
    ``same_tasks``: refuse runs whose nodes saw other questions than the baseline's (off for the
    paper's accounting, where an I/J node answers the first I of a 4/0 node's tasks)."""
    if same_tasks:
        _check_same_tasks(runs)
    seeds = sorted(set.intersection(*(set(run.rewards) for run in runs)))
    if not seeds:
        raise SystemExit("the runs have no seed in common: nothing to pair")
    common = min(run.finished(seed) for run in runs for seed in seeds)
    common = common if rounds is None else min(rounds, common)
    cumulative = [{s: sum(run.rewards[s][r] for r in range(common)) for s in seeds} for run in runs]
    heldout = [_heldout(run, runs, seeds, common) for run in runs]
    lines = [
        f"seeds {', '.join(map(str, seeds))}; rounds compared: {common}",
        "| run | cumulative reward | vs first, paired by seed | 95% CI | last held-out accuracy "
        "| vs first, paired | 95% CI | collapsed nodes |",
        "| --- | ---: | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    for k, run in enumerate(runs):
        accuracy = {s: a for s, (a, _) in heldout[k].items()}
        cells = [run.name, f"{_mean(cumulative[k]):.2f}"]
        cells += _paired(cumulative[k], cumulative[0], k == 0, "{:+.2f}")
        cells.append(f"{_mean(accuracy):.3f}" if accuracy else "-")
        cells += _paired(accuracy, {s: a for s, (a, _) in heldout[0].items()}, k == 0, "{:+.3f}")
        cells.append(str(sum(c for _, c in heldout[k].values())))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def learning(runs: list[Run], *, rounds: int | None = None) -> list[str]:
    """Lines of the table of how each run learned, over the seeds and rounds ``compare`` pairs
    (the first run is the baseline of the paired held-out column)."""
    seeds = sorted(set.intersection(*(set(run.rewards) for run in runs)))
    common = min(run.finished(seed) for run in runs for seed in seeds)
    common = common if rounds is None else min(rounds, common)
    means = [_heldout_mean(run, runs, seeds, common) for run in runs]
    lines = [
        "| run | steps per node | own / mixed / peers only / none | grad norm, median "
        "| clipped | peers' log-prob gap, median | peers' ESS, median | peers' groups dropped "
        "per node-round | held-out, mean over evaluations | vs first, paired | 95% CI |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for k, run in enumerate(runs):
        rows = [r for r in run.rows if int(r["seed"]) in seeds and int(r["round"]) < common]
        nodes = len({(r["seed"], r["node"]) for r in rows})
        kinds = Counter(r.get("step_kind") or "-" for r in rows)
        norms = _numbers(rows, "grad_norm")
        cells = [
            run.name,
            f"{sum(_numbers(rows, 'trained')) / nodes:.1f}" if nodes else "-",
            " / ".join(
                f"{kinds[kind] / len(rows):.0%}" if "step_kind" in rows[0] else "-"
                for kind in ("own", "mixed", "peers", "none")
            ),
            _median(norms),
            f"{sum(n > 1 for n in norms) / len(norms):.0%}" if norms else "-",
            _median(_numbers(rows, "peer_logprob_gap")),
            _median(_numbers(rows, "peer_ess")),
            f"{sum(_numbers(rows, 'peer_groups_dropped')) / len(rows):.2f}"
            if "peer_groups_dropped" in rows[0]
            else "-",
            f"{_mean(means[k]):.3f}" if means[k] else "-",
            *_paired(means[k], means[0], k == 0, "{:+.3f}"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _numbers(rows: list[dict[str, str]], column: str) -> list[float]:
    return [float(r[column]) for r in rows if r.get(column) not in (None, "")]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def _heldout_mean(run: Run, runs: list[Run], seeds: list[int], rounds: int) -> dict[int, float]:
    """Per seed: the mean over nodes and over every evaluation after round 0 (at most
    ``rounds``) that all runs have for that seed."""
    found = {}
    for seed in seeds:
        shared = set.intersection(*(set(r.evals.get(seed, {})) for r in runs))
        usable = sorted(r for r in shared if 0 < r <= rounds)
        if usable:
            per_round = [statistics.fmean(a for a, _ in run.evals[seed][r]) for r in usable]
            found[seed] = statistics.fmean(per_round)
    return found


def _heldout(
    run: Run, runs: list[Run], seeds: list[int], rounds: int
) -> dict[int, tuple[float, int]]:
    """Per seed: mean accuracy over nodes and nodes collapsed, at the last evaluation round (at
    most ``rounds``) that every run has for that seed."""
    found = {}
    for seed in seeds:
        shared = set.intersection(*(set(r.evals.get(seed, {})) for r in runs))
        usable = [r for r in shared if r <= rounds]
        if usable:
            results = run.evals[seed][max(usable)]
            accuracy = sum(a for a, _ in results) / len(results)
            found[seed] = (accuracy, sum(f < COLLAPSE_FORMAT_RATE for _, f in results))
    return found


def _mean(values: dict[int, float]) -> float:
    return sum(values.values()) / len(values) if values else float("nan")


def _paired(run: dict[int, float], base: dict[int, float], is_base: bool, form: str) -> list[str]:
    seeds = sorted(set(run) & set(base))
    if is_base or not seeds:
        return ["-", "-"]
    differences = [run[s] - base[s] for s in seeds]
    interval = t_interval(differences)
    shown = "n/a" if interval is None else "[" + ", ".join(form.format(x) for x in interval) + "]"
    return [form.format(sum(differences) / len(differences)), shown]


def _check_same_tasks(runs: list[Run]) -> None:
    """Paired runs must have seen the same questions: same seeds, same per-node task streams."""
    base = runs[0]
    for run in runs[1:]:
        shared = set(run.tasks) & set(base.tasks)
        differ = [key for key in shared if run.tasks[key] != base.tasks[key]]
        if not shared or differ:
            raise SystemExit(
                f"{run.name} and {base.name} did not see the same tasks "
                f"({len(differ)} of {len(shared)} node-rounds differ): not a paired comparison"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="FOLDER:I/J, the baseline first")
    parser.add_argument("--rounds", type=int, help="compare the first N rounds only")
    parser.add_argument(
        "--other-tasks",
        action="store_true",
        help="allow runs whose nodes answered other tasks (the paper's accounting: an I/J node "
        "answers the first I of the baseline's)",
    )
    parser.add_argument(
        "--learning",
        action="store_true",
        help="also print how each run learned: steps, step kinds, gradient norms, the peers' "
        "log-prob gap and ESS, and held-out accuracy averaged over the evaluations",
    )
    args = parser.parse_args(argv)
    runs = [load_run(spec) for spec in args.runs]
    print("\n".join(compare(runs, rounds=args.rounds, same_tasks=not args.other_tasks)))
    if args.learning:
        print()
        print("\n".join(learning(runs, rounds=args.rounds)))


if __name__ == "__main__":
    main()
