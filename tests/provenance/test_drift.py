"""An honest batch passes a recompute on other kernels and thread counts, in another process
(scripts/measure_sampler_drift.py on the tiny model with a peaked output layer)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from node.provenance.check import SOFT_TOLERANCE
from tests.scripts import load_script


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("measure_sampler_drift")


@pytest.fixture(scope="module")
def job(script: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("drift") / "job.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SWARM_CACHE_DIR", str(path.parent / "cache"))
        script.sample_job("tiny", 3, 4, 12, path)
    return path


@pytest.mark.parametrize(("threads", "capability"), [(2, None), (1, "avx2")])
def test_an_honest_batch_passes_on_other_kernels_and_threads(
    script: ModuleType, job: Path, threads: int, capability: str | None, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SWARM_CACHE_DIR", str(job.parent / "cache"))
    result = script.recompute_elsewhere(job, threads, capability)
    assert result["threads"] == threads and result["completions"] == 12
    if capability:
        assert result["capability"] == "AVX2"
    else:
        assert result["capability"] == torch.backends.cpu.get_cpu_capability()
    assert result["below_soft"] == 0 and result["worst"] > -SOFT_TOLERANCE
