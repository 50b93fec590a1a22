"""scripts/compare_runs.py on crafted run folders: cumulative rewards and held-out accuracy
paired by seed across folders, hand-computed; runs that saw other tasks are refused."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_runs.py"
ROUND_FIELDS = ("config", "seed", "round", "node", "reward", "tasks_digest")
EVAL_FIELDS = ("config", "seed", "round", "node", "accuracy", "format_rate")


def write(path: Path, fields: tuple[str, ...], rows: list[tuple]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        writer.writerows(rows)


def folder(tmp_path: Path, name: str, label: str, reward: dict[int, float], acc: float) -> Path:
    """2 seeds x 2 rounds x 2 nodes; node rewards ``reward[seed]`` and ``reward[seed] + 0.2``;
    held-out after round 2: ``acc`` and, for node 1, a collapsed 0.0 in seed 1."""
    run = tmp_path / name
    rows = [
        (label, seed, r, node, reward[seed] + 0.2 * node, f"t{seed}{r}{node}")
        for seed in (0, 1)
        for r in (0, 1)
        for node in (0, 1)
    ]
    write(run / "rounds.csv", ROUND_FIELDS, rows)
    evals = [(label, s, 0, n, 0.1, 1.0) for s in (0, 1) for n in (0, 1)]
    evals += [(label, 0, 2, n, acc, 1.0) for n in (0, 1)]
    evals += [(label, 1, 2, 0, acc, 1.0), (label, 1, 2, 1, 0.0, 0.2)]
    write(run / "eval.csv", EVAL_FIELDS, evals)
    return run


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def test_runs_in_two_folders_are_paired_by_seed(tmp_path: Path) -> None:
    base = folder(tmp_path, "solo", "4/0", {0: 0.1, 1: 0.3}, acc=0.4)
    other = folder(tmp_path, "shared", "2/2", {0: 0.2, 1: 0.2}, acc=0.6)
    result = run_script(f"{base}:4/0", f"{other}:2/2")
    assert result.returncode == 0, result.stderr
    table = {line.split(" | ")[0].lstrip("| "): line for line in result.stdout.splitlines()}
    # cumulative: 2 rounds x (mean of r, r + 0.2) -> seed 0: 0.4 vs 0.6, seed 1: 0.8 vs 0.6
    # held-out: seed 0: 0.4 vs 0.6; seed 1: (0.4 + 0) / 2 vs (0.6 + 0) / 2; one collapse each
    assert table[f"{base}:4/0"].split(" | ")[1:] == ["0.60", "-", "-", "0.300", "-", "-", "1 |"]
    cells = table[f"{other}:2/2"].split(" | ")
    assert cells[1:3] == ["0.60", "+0.00"]
    assert cells[4:6] == ["0.450", "+0.150"]
    assert cells[7] == "1 |"


def test_runs_that_saw_other_tasks_are_refused_unless_allowed(tmp_path: Path) -> None:
    base = folder(tmp_path, "solo", "4/0", {0: 0.1, 1: 0.3}, acc=0.4)
    other = folder(tmp_path, "paper", "2/2", {0: 0.2, 1: 0.2}, acc=0.6)
    rows = list(csv.reader((other / "rounds.csv").open()))
    write(other / "rounds.csv", ROUND_FIELDS, [r[:5] + ["other"] for r in rows[1:]])
    refused = run_script(f"{base}:4/0", f"{other}:2/2")
    assert refused.returncode != 0 and "did not see the same tasks" in refused.stderr
    assert run_script(f"{base}:4/0", f"{other}:2/2", "--other-tasks").returncode == 0


@pytest.mark.parametrize("spec", ["missing:4/0", "{base}:2/2"])
def test_a_run_without_rows_is_one_clear_error(tmp_path: Path, spec: str) -> None:
    base = folder(tmp_path, "solo", "4/0", {0: 0.1, 1: 0.3}, acc=0.4)
    result = run_script(f"{base}:4/0", spec.format(base=base))
    assert result.returncode != 0 and "no rows of configuration" in result.stderr


def test_only_seeds_and_rounds_every_run_finished_are_compared(tmp_path: Path) -> None:
    """A baseline still running its second seed: only seed 0 is paired, over rounds both have."""
    base = folder(tmp_path, "solo", "4/0", {0: 0.1, 1: 0.3}, acc=0.4)
    other = folder(tmp_path, "shared", "2/2", {0: 0.2, 1: 0.2}, acc=0.6)
    rows = list(csv.reader((other / "rounds.csv").open()))[1:]
    write(other / "rounds.csv", ROUND_FIELDS, [r for r in rows if r[1] == "0"])
    result = run_script(f"{base}:4/0", f"{other}:2/2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("seeds 0; rounds compared: 2")
    cells = result.stdout.splitlines()[-1].split(" | ")
    assert cells[1:3] == ["0.60", "+0.20"] and cells[4:6] == ["0.600", "+0.200"]


def test_learning_table_from_the_per_round_columns(tmp_path: Path) -> None:
    """--learning: steps per node, step kinds, gradient norms, the peers' gap, ESS and dropped
    groups from rounds.csv; held-out averaged over the evaluations after round 0, paired."""
    fields = (*ROUND_FIELDS, "trained", "step_kind", "grad_norm", "peer_logprob_gap", "peer_ess")
    fields += ("peer_groups_dropped",)
    runs = {}
    for name, label, kinds in (("solo", "4/0", ("own", "none")), ("shared", "2/2", ("mixed",))):
        run = folder(tmp_path, name, label, {0: 0.1, 1: 0.3}, acc=0.4 if name == "solo" else 0.5)
        rows = []
        for i, r in enumerate(csv.DictReader((run / "rounds.csv").open())):
            kind = kinds[i % len(kinds)]
            shared = name == "shared"
            gap, ess, dropped = ("0.5", "0.9", "1") if shared else ("", "", "0")
            norm = "" if kind == "none" else str(0.5 + i % 4)  # 0.5, 1.5, 2.5, 3.5, ...
            trained = "0" if kind == "none" else "1"
            rows.append((*r.values(), trained, kind, norm, gap, ess, dropped))
        write(run / "rounds.csv", fields, rows)
        evals = list(csv.reader((run / "eval.csv").open()))[1:]
        evals += [(label, s, 1, n, 0.2, 1.0) for s in (0, 1) for n in (0, 1)]
        write(run / "eval.csv", EVAL_FIELDS, evals)
        runs[name] = run
    result = run_script(f"{runs['solo']}:4/0", f"{runs['shared']}:2/2", "--learning")
    assert result.returncode == 0, result.stderr
    table = {line.split(" | ")[0].lstrip("| "): line for line in result.stdout.splitlines()}
    solo = table[f"{runs['solo']}:4/0"].split(" | ")[1:]
    shared = table[f"{runs['shared']}:2/2"].split(" | ")[1:]
    # solo: 8 rows, own and none alternating -> 1 step per node (4 nodes over 2 seeds), norms
    # 0.5 and 2.5 -> median 1.5, one of two above 1; held-out per seed: rounds 1 (0.2) and 2
    # (0.4, or 0.2 in seed 1 with its collapsed node) -> 0.3 and 0.2
    assert solo[:5] == ["1.0", "50% / 0% / 0% / 50%", "1.50", "50%", "-"]
    assert solo[5:8] == ["-", "0.00", "0.250"]
    # shared: every row a mixed step -> 2 steps per node; norms 0.5..3.5 -> median 2.0, 75 %
    # clipped; gap 0.5, ESS 0.9, one group dropped per node-round; held-out 0.35 and 0.225
    assert shared[:5] == ["2.0", "0% / 100% / 0% / 0%", "2.00", "75%", "0.50"]
    assert shared[5:9] == ["0.90", "1.00", "0.287", "+0.037"]
