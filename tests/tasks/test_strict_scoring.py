"""The "strict" scoring rule: 1 only for a clean stop after one exact answer, and the "dataset"
rule left exactly as it was (it ignores the finish reason)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.chain.rounds import round_seed
from node.learning_data import FinishReason
from node.tasks import (
    PRESETS,
    Preset,
    TaskItem,
    derive_tasks,
    extract_answer,
    score_answer,
    score_completion,
)
from node.tasks.scoring import strict_answer

PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
REASONS: tuple[FinishReason | None, ...] = ("stop", "length", None)


def strict_twin(name: str) -> Preset:
    """The shipped preset ``name`` with the strict rule: the same draw, another scoring."""
    return PRESETS[name].model_copy(update={"name": f"{name}-strict-test", "scoring": "strict"})


def sample(preset: Preset, rounds: int) -> list[TaskItem]:
    return [
        t for r in range(rounds) for t in derive_tasks(round_seed(b"\x44" * 32, r), PEER, preset)
    ]


STRICT = sample(strict_twin("smol-easy"), 5)
# A one-character reference, so that containment gives exactly 0.5 under "dataset".
ONE_DIGIT = next(t for t in STRICT if len(t.answer) == 1)
AS_DATASET = ONE_DIGIT.model_copy(update={"scoring": "dataset"})


def strict(text: str, reason: FinishReason | None = "stop") -> float:
    return score_completion(ONE_DIGIT, text, finish_reason=reason)


def dataset(text: str, reason: FinishReason | None = "stop") -> float:
    return score_completion(AS_DATASET, text, finish_reason=reason)


A = ONE_DIGIT.answer

RULE_TABLE: list[tuple[str, FinishReason | None, float, float]] = [
    # text, finish reason, dataset score, strict score
    (f"<answer>{A}</answer>", "stop", 1.0, 1.0),
    (f"<answer>{A}</answer>", "length", 1.0, 0.0),  # cut
    (f"<answer>{A}</answer>", None, 1.0, 0.0),  # unknown is no proof of a stop
    (f"<answer>{A}</answer> ok", "stop", 1.0, 0.0),  # text after the closing tag
    (f"<answer>{A}</answer></answer></answer></answer", "stop", 1.0, 0.0),  # a junk tail
    (f"<answer>{A}</answer>\n \t", "stop", 1.0, 1.0),  # whitespace after it is fine
    (f"<answer> {A}\n</answer>", "stop", 1.0, 1.0),  # the answer is stripped
    (f"Adding them up gives {A}.\n<answer>{A}</answer>", "stop", 1.0, 1.0),  # reasoning first
    (f"<answer>1</answer><answer>{A}</answer>", "stop", 1.0, 0.0),  # a hedge: two pairs
    (f"<answer>{A}</answer><answer>{A}</answer>", "stop", 1.0, 0.0),  # even the same one twice
    (f"<answer><answer>{A}</answer>", "stop", 1.0, 0.0),  # two opening tags
    (f"<answer>1{A}</answer>", "stop", 0.5, 0.0),  # containment: no partial credit
    (f"<answer>-{A}</answer>", "stop", 0.5, 0.0),
    (f"</answer><answer>{A}", "stop", 0.0, 0.0),  # tags in the wrong order
    (f"<answer>{A}", "stop", 0.0, 0.0),  # unclosed
    (A, "stop", 0.0, 0.0),  # untagged
    ("", "stop", 0.0, 0.0),
]


@pytest.mark.parametrize(("text", "reason", "dataset_score", "strict_score"), RULE_TABLE)
def test_the_strict_rule_on_crafted_texts(
    text: str, reason: FinishReason | None, dataset_score: float, strict_score: float
) -> None:
    assert dataset(text, reason) == dataset_score
    result = strict(text, reason)
    assert type(result) is float and result == strict_score


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("why <answer> 7 </answer> \n", "7"),
        ("<answer></answer>", ""),
        ("<answer><answer>7</answer>", None),  # not the answer "<answer>7"
        ("<answer>7</answer><answer>", None),
        ("<answer>7</answer></answer>", None),
        ("</answer><answer>7", None),
    ],
)
def test_the_strict_format_is_checked_before_any_scorer(text: str, expected: str | None) -> None:
    assert strict_answer(text, "stop") == expected
    assert strict_answer(text, "length") is None and strict_answer(text, None) is None


def test_a_wrong_answer_scores_zero_under_both_rules() -> None:
    wrong = f"<answer>{int(A) + 1}</answer>"
    assert strict(wrong) == 0.0 and dataset(wrong) == 0.0


def test_derived_items_carry_their_presets_rule() -> None:
    assert {t.scoring for t in STRICT} == {"strict"}
    for preset in PRESETS.values():
        assert {t.scoring for t in sample(preset, 1)} == {preset.scoring}


def test_the_strict_presets_are_their_twins_tasks_under_the_strict_rule() -> None:
    for name in ("smol", "paper"):
        loose, strict = PRESETS[{"smol": "smol-easy"}.get(name, name)], PRESETS[f"{name}-strict"]
        assert (loose.scoring, strict.scoring) == ("dataset", "strict")
        assert (strict.entries, strict.tasks_per_round) == (loose.entries, loose.tasks_per_round)
        assert [t.question for t in sample(strict, 3)] == [t.question for t in sample(loose, 3)]


def test_strict_binarises_every_reviewed_scorer() -> None:
    """Where "dataset" pays 1.0 strict pays 1.0; partial credit (binary_matrix's 0.1 for a list
    of rows, propositional_logic's 0.25) becomes 0.0."""
    strict_items = sample(strict_twin("paper"), 8)
    seen = set()
    for item in strict_items:
        twin = item.model_copy(update={"scoring": "dataset"})
        for answer in filter(None, (item.answer, item.metadata.get("example_answer"), "banana")):
            text = f"Thinking.\n<answer>{answer}</answer>"
            loose = score_completion(twin, text, finish_reason="stop")
            assert score_completion(item, text, finish_reason="stop") == float(loose == 1.0)
            seen.add(item.dataset)
    assert seen == {e.dataset for e in PRESETS["paper"].entries}
    matrix = next(t for t in strict_items if t.dataset == "binary_matrix")
    matrix_rows = [[int(x) for x in line.split()] for line in matrix.answer.splitlines()]
    rows = f"<answer>{matrix_rows}</answer>"  # the right matrix as a list: partial credit
    as_dataset = matrix.model_copy(update={"scoring": "dataset"})
    assert score_completion(as_dataset, rows, finish_reason="stop") == 0.1
    assert score_completion(matrix, rows, finish_reason="stop") == 0.0


# --- properties --------------------------------------------------------------------------------

fragments = st.sampled_from(
    ["<answer>", "</answer>", "</answer", "<", ">", "/", A, "1", "-", " ", "\n", "\t", "ok", "🎉"]
)
texts = st.one_of(st.lists(fragments, max_size=12).map("".join), st.text(max_size=200))
reasons = st.sampled_from(REASONS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, reason=reasons)
def test_strict_is_zero_or_one_and_never_above_dataset(
    text: str, reason: FinishReason | None
) -> None:
    value = strict(text, reason)
    assert value in (0.0, 1.0)
    assert value <= dataset(text, reason)
    if reason != "stop":
        assert value == 0.0


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_dataset_ignores_the_finish_reason(text: str) -> None:
    expected = score_answer(AS_DATASET, extract_answer(text))
    assert [dataset(text, reason) for reason in REASONS] == [expected] * len(REASONS)


no_tags = st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=100)
spaces = st.text(alphabet=" \t\n\r\u00a0\u2003", max_size=10)


@given(prefix=no_tags, inner=spaces, suffix=spaces)
def test_a_clean_exact_answer_after_any_reasoning_scores_one(
    prefix: str, inner: str, suffix: str
) -> None:
    assert strict(f"{prefix}<answer>{inner}{A}{inner}</answer>{suffix}") == 1.0
