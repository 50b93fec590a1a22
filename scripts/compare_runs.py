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
first, paired by seed, with a 95% t interval over seeds.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from node.experiment.outputs import COLLAPSE_FORMAT_RATE, t_interval  # noqa: E402


@dataclass(frozen=True)
class Run:
    """One configuration of one run folder, per seed."""

    name: str
    cumulative: dict[int, float]  # seed -> sum over rounds of the mean reward over nodes
    heldout: dict[int, float]  # seed -> mean held-out accuracy at the last evaluation
    collapsed: int  # nodes whose last held-out format rate is below the collapse threshold
    tasks: dict[tuple[int, int, int], str]  # (seed, round, node) -> tasks digest
    rounds: int


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def load_run(spec: str, rounds: int | None = None) -> Run:
    """``FOLDER:I/J``: that configuration's rows of the folder, over its first ``rounds`` rounds
    (all rounds every seed finished when None)."""
    folder, _, label = spec.rpartition(":")
    rows = [r for r in _rows(Path(folder) / "rounds.csv") if r["config"] == label]
    if not rows:
        raise SystemExit(f"{spec}: no rows of configuration {label!r} in {folder}/rounds.csv")
    per_seed: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    tasks = {}
    for r in rows:
        seed, round = int(r["seed"]), int(r["round"])
        per_seed[seed][round].append(float(r["reward"] or 0.0))
        tasks[(seed, round, int(r["node"]))] = r["tasks_digest"]
    done = min(len(by_round) for by_round in per_seed.values())
    rounds = done if rounds is None else min(rounds, done)
    cumulative = {
        seed: sum(sum(v) / len(v) for r, v in by_round.items() if r < rounds)
        for seed, by_round in per_seed.items()
    }
    heldout, collapsed = _last_heldout(Path(folder) / "eval.csv", label)
    return Run(spec, cumulative, heldout, collapsed, tasks, rounds)


def _last_heldout(path: Path, label: str) -> tuple[dict[int, float], int]:
    last: dict[int, tuple[int, list[dict[str, str]]]] = {}
    for r in _rows(path):
        if r["config"] != label:
            continue
        seed, round = int(r["seed"]), int(r["round"])
        if seed not in last or round > last[seed][0]:
            last[seed] = (round, [])
        if round == last[seed][0]:
            last[seed][1].append(r)
    accuracy = {s: sum(float(r["accuracy"]) for r in rs) / len(rs) for s, (_, rs) in last.items()}
    collapsed = sum(
        float(r["format_rate"]) < COLLAPSE_FORMAT_RATE for _, rs in last.values() for r in rs
    )
    return accuracy, collapsed


def compare(runs: list[Run], *, same_tasks: bool = True) -> list[str]:
    """Lines of the comparison table; the first run is the baseline. ``same_tasks``: refuse runs
    whose nodes saw other questions than the baseline's (off for the paper's accounting, where an
    I/J node answers the first I of a 4/0 node's tasks)."""
    base = runs[0]
    if same_tasks:
        _check_same_tasks(runs)
    lines = [
        f"rounds compared: {min(r.rounds for r in runs)}",
        "| run | cumulative reward | vs first, paired by seed | 95% CI | last held-out accuracy "
        "| vs first, paired | 95% CI | collapsed nodes |",
        "| --- | ---: | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    for run in runs:
        cells = [run.name, f"{_mean(run.cumulative):.2f}"]
        cells += _paired(run.cumulative, base.cumulative, run is base, "{:+.2f}")
        cells.append(f"{_mean(run.heldout):.3f}" if run.heldout else "-")
        cells += _paired(run.heldout, base.heldout, run is base, "{:+.3f}")
        cells.append(str(run.collapsed))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


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
    args = parser.parse_args(argv)
    runs = [load_run(spec, args.rounds) for spec in args.runs]
    print("\n".join(compare(runs, same_tasks=not args.other_tasks)))


if __name__ == "__main__":
    main()
