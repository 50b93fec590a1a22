"""Fixtures of the provenance tests: the peaked tiny model and the prompts."""

from __future__ import annotations

import pytest

from node.policy.model import encode_prompts
from tests.provenance.helpers import QUESTIONS, peaked_tiny_model


@pytest.fixture(scope="module")
def peaked(tokenizer):  # type: ignore[no-untyped-def]
    return peaked_tiny_model(tokenizer, 1)


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:  # type: ignore[no-untyped-def]
    return encode_prompts(tokenizer, [[{"role": "user", "content": q}] for q in QUESTIONS])
