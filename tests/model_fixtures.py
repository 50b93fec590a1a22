"""Model fixtures: one tiny random model (with the shipped tokenizer), built once per session.

Nothing is read from or written to the user's cache: ``SWARM_CACHE_DIR`` points at a temporary
folder while the model loads (so the tokenizer comes from the shipped GGUF, ~3 s).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import torch

from node.policy.model import BaseModel, load_base

# One thread unless told (OMP_NUM_THREADS). The tiny model's ops are too small to gain from two,
# and on a 2-core VM where another process keeps one core busy, torch's unbound OpenMP threads
# make every op above its grain size wait ~8 ms: the policy tests took 169 s instead of 12 s.
# (Set here, for every test in the process: the node and integration tests run the same model.)
if "OMP_NUM_THREADS" not in os.environ:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseModel]:
    """A frozen two-layer random Llama on CPU, float32, seed 0. Do not modify it in place."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SWARM_CACHE_DIR", str(tmp_path_factory.mktemp("swarm-cache")))
        base = load_base("tiny", device="cpu", dtype="float32", seed=0)
    yield base


@pytest.fixture(scope="session")
def tokenizer(tiny_base: BaseModel):  # type: ignore[no-untyped-def]
    """The shipped SmolLM2 tokenizer (pad token set), shared with ``tiny_base``."""
    return tiny_base.tokenizer
