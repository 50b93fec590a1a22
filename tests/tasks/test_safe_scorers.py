"""Untrusted answers are never run as code: the allow-list of scorers and the binary_matrix
replacement, checked against reasoning-gym's own scorer on harmless answers."""

from __future__ import annotations

import builtins

import pytest
import reasoning_gym
from pydantic import ValidationError

from node.chain.rounds import round_seed
from node.tasks import (
    PRESETS,
    PresetEntry,
    UnsafeScorer,
    derive_tasks,
    generator,
    get_preset,
    score_completion,
)
from node.tasks.safe_scorers import REVIEWED_SCORERS, SAFE_SCORERS, score_binary_matrix

PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def binary_matrix_items() -> list:
    paper = get_preset("paper")
    tasks = [t for r in range(40) for t in derive_tasks(round_seed(b"\x44" * 32, r), PEER, paper)]
    found = [t for t in tasks if t.dataset == "binary_matrix"]
    assert len(found) >= 10
    return found


def test_presets_use_reviewed_scorers_only() -> None:
    for preset in PRESETS.values():
        assert {e.dataset for e in preset.entries} <= REVIEWED_SCORERS
    assert set(SAFE_SCORERS) <= REVIEWED_SCORERS


@pytest.mark.parametrize("dataset", ["spiral_matrix", "n_queens", "countdown", "products"])
def test_unreviewed_datasets_are_refused(dataset: str) -> None:
    with pytest.raises(ValidationError, match="not been reviewed"):
        PresetEntry(dataset=dataset, weight=1.0)
    with pytest.raises(UnsafeScorer):
        generator.score(dataset, {}, "1", {"question": "", "answer": "1", "metadata": {}})


def test_code_in_an_answer_is_not_run() -> None:
    item = binary_matrix_items()[0]
    payload = "__import__('builtins').__setattr__('SWARM_PWNED', 1) or [[0]]"
    for answer in (payload, f"[{payload}]", "[[__import__('os').getpid()]]"):
        assert score_completion(item, f"<answer>{answer}</answer>", finish_reason="stop") == 0.0
    assert not hasattr(builtins, "SWARM_PWNED")


def test_binary_matrix_replacement_agrees_with_the_original_on_literals() -> None:
    original = reasoning_gym.create_dataset("binary_matrix", seed=0, size=1)
    for item in binary_matrix_items():
        rows = [[int(x) for x in line.split()] for line in item.answer.split("\n")]
        wrong = [[x + 1 for x in row] for row in rows]
        answers = [
            item.answer,
            str(rows),
            str(wrong),
            str([tuple(row) for row in rows]),
            item.answer.replace("\n", " "),
            "",
            "[[1, 2], [3",
            "[" * 500 + "]" * 500,
            "7",
            "None",
            "'text'",
        ]
        for answer in answers:
            assert score_binary_matrix(answer, item.entry()) == original.score_answer(
                answer, item.entry()
            ), answer
        assert score_completion(item, f"<answer>{rows}</answer>", finish_reason="stop") == 0.1
        assert score_binary_matrix(None, item.entry()) == 0.0
