"""scripts/bench_data_plane.py still runs against the code it measures (it had broken once, when
the verifier's round context gained the batch shape, and nothing noticed): a short run prints its
baseline and a ratio for each stage. No figure is asserted (performance is measured, not tested)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_data_plane.py"
STAGES = ("sha256 + json.loads (baseline)", "sign + encode + store.put", "store.get + verify")
#: A stage's row: its name, batches per second, and its cost as a multiple of the baseline's.
ROW = re.compile(r"^(?P<stage>.+?)\s{2,}(?P<rate>\d+(?:\.\d+)?)\s+(?P<ratio>\d+(?:\.\d+)?)$")


def test_the_data_plane_benchmark_runs_and_reports_ratios_against_its_baseline() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "0.05"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {
        match["stage"]: float(match["ratio"])
        for line in result.stdout.splitlines()
        if (match := ROW.match(line.strip()))
    }
    found = {
        stage: ratio for name, ratio in rows.items() for stage in STAGES if name.startswith(stage)
    }
    assert set(found) == set(STAGES), result.stdout
    assert found[STAGES[0]] == 1.0 and all(ratio > 0 for ratio in found.values())
