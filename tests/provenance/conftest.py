"""Fixtures of the provenance tests: the peaked tiny model and the prompts."""

from __future__ import annotations

import pytest

from node.policy.model import encode_prompts
from tests.provenance.helpers import QUESTIONS, with_random_head


@pytest.fixture(scope="module")
def peaked(tiny_base):  # type: ignore[no-untyped-def]
    return with_random_head(tiny_base.model, 1)


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:  # type: ignore[no-untyped-def]
    return encode_prompts(tokenizer, [[{"role": "user", "content": q}] for q in QUESTIONS])
