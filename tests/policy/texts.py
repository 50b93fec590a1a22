"""Completions known by their text, for the policy tests."""

from __future__ import annotations

from collections.abc import Iterable

from node.learning_data import TextCompletion


def stopped(texts: Iterable[str]) -> list[TextCompletion]:
    """Texts of completions that ended with a stop token (trained with end-of-turn appended)."""
    return [TextCompletion(text, "stop") for text in texts]
