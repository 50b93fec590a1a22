"""Answer extraction and rewards: edge cases, reference answers, and garbage that must not raise."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.chain.rounds import round_seed
from node.tasks import (
    PRESETS,
    TaskItem,
    derive_tasks,
    extract_answer,
    generator,
    get_preset,
    score_answer,
    score_completion,
    scoring,
)
from node.tasks import scoring
from node.tasks.scoring import MAX_SCAN_CHARS, answer_char_limit

PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def items(preset_name: str, rounds: int) -> list[TaskItem]:
    preset = get_preset(preset_name)
    return [
        t for r in range(rounds) for t in derive_tasks(round_seed(b"\x33" * 32, r), PEER, preset)
    ]


SAMPLE = {name: items(name, 25) for name in PRESETS}  # 200 items per preset
ONE_PER_DATASET = list({t.dataset: t for ts in SAMPLE.values() for t in ts}.values())


def tagged(answer: str) -> str:
    return f"Let me think. 3 + 4 = 7? No.\n<answer>{answer}</answer>"


def reference(item: TaskItem) -> str:
    """The answer a perfect solver gives: the reference, or the generator's example conclusion."""
    return item.answer if item.answer is not None else item.metadata["example_answer"]


# --- extract_answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>7</answer>", "7"),
        ("<answer>  7 \n</answer>", "7"),
        ("<answer>\n\t-12\n</answer>", "-12"),
        ("<answer></answer>", ""),
        ("<answer>   </answer>", ""),
        ("<answer>1</answer> then <answer>2</answer>", "2"),
        ("<answer>1</answer><answer>2</answer><answer>3</answer> done", "3"),
        ("<answer>a<answer>b</answer></answer>", "b"),
        ("<answer>a</answer> trailing <answer>b", "a"),
        ("<answer>unclosed", None),
        ("closed only</answer>", None),
        ("</answer> reversed <answer>", None),
        ("<ANSWER>7</ANSWER>", None),
        ("<answer >7</answer >", None),
        ("no tags at all", None),
        ("", None),
        ("<answer>十二</answer>", "十二"),
        ("<answer> 🎉 ≠ ∧ ¬P </answer>", "🎉 ≠ ∧ ¬P"),
        ("<answer>line one\nline two</answer>", "line one\nline two"),
        ("<answer>\x00</answer>", "\x00"),
        ("<answer><answer>5</answer>", "5"),
        ("<answer>5</answer></answer>", "5"),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


def test_extract_answer_on_non_text() -> None:
    assert extract_answer(None) is None  # type: ignore[arg-type]
    assert extract_answer(b"<answer>1</answer>") is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x" * 1_000_000 + "<answer>42</answer>", "42"),
        ("<answer>" * 200_000, None),
        ("</answer>" * 200_000, None),
        ("<answer>" + "</answer>" * 200_000, None),  # the opening tag is beyond the scanned tail
        ("<answer>" + "</answer>" * 1_000, ""),
        ("<answer>" * 200_000 + "9</answer>", "9"),
        ("<answer>1</answer>" * 100_000, "1"),
        ("<answ" * 300_000 + "<answer>8</answer>", "8"),
        # Only the last MAX_SCAN_CHARS characters are read.
        ("<answer>42</answer>" + "x" * 1_000_000, None),
        ("<answer>" + "y" * (MAX_SCAN_CHARS + 10) + "</answer>", None),
    ],
)
def test_extract_answer_reads_only_the_tail_of_a_huge_text(text: str, expected: str | None) -> None:
    """What keeps a peer's megabyte of tags cheap to score: only the last MAX_SCAN_CHARS
    characters are scanned, three linear ``str`` scans (no timing asserted here)."""
    assert extract_answer(text) == expected


no_angle = st.text(alphabet=st.characters(blacklist_characters="<>"))


@given(prefix=no_angle, body=no_angle, suffix=no_angle)
def test_extract_answer_finds_a_tagged_body(prefix: str, body: str, suffix: str) -> None:
    assert extract_answer(f"{prefix}<answer>{body}</answer>{suffix}") == body.strip()


# --- score_completion -------------------------------------------------------------------------


@pytest.mark.parametrize("preset_name", sorted(PRESETS))
def test_reference_answers_score_one(preset_name: str) -> None:
    for item in SAMPLE[preset_name]:
        direct = generator.score(item.dataset, item.config, reference(item), item.entry())
        value = score_completion(item, tagged(reference(item)), finish_reason="stop")
        expected = float(direct == 1.0) if item.scoring == "strict" else direct
        assert value == pytest.approx(expected)
        if item.answer is not None:
            assert score_completion(item, tagged(item.answer), finish_reason="stop") == 1.0, item
    # propositional_logic has no reference answer; its example conclusion is valid almost always
    logic = [t for t in SAMPLE[preset_name] if t.answer is None]
    if logic:
        ones = sum(
            score_completion(t, tagged(reference(t)), finish_reason="stop") == 1.0 for t in logic
        )
        assert ones >= 0.9 * len(logic)


# Scorers that give a token reward to any answer: fraction_simplification 0.01; propositional_logic
# 0.25 for a "trivial" conclusion such as a bare word when the premises contradict each other;
# calendar_arithmetic a sliver for numbers near the reference.
LENIENT = {
    "fraction_simplification": 0.01,
    "propositional_logic": 0.25,
    "calendar_arithmetic": 0.01,
}


@pytest.mark.parametrize("preset_name", sorted(PRESETS))
def test_wrong_or_untagged_answers_score_zero(preset_name: str) -> None:
    for item in SAMPLE[preset_name]:
        assert score_completion(item, reference(item), finish_reason="stop") == 0.0  # no tags
        unclosed = f"<answer>{reference(item)}"
        assert score_completion(item, unclosed, finish_reason="stop") == 0.0
        assert score_completion(item, "", finish_reason="stop") == 0.0
        for wrong in ("", "banana", "no idea, sorry"):
            value = score_completion(item, f"<answer>{wrong}</answer>", finish_reason="stop")
            assert value <= LENIENT.get(item.dataset, 0.0), (item.dataset, wrong, value)


def test_off_by_one_sums_score_zero() -> None:
    for item in SAMPLE["smol-easy"]:
        for wrong in (int(item.answer) + 1, int(item.answer) - 1):
            assert score_completion(item, tagged(str(wrong)), finish_reason="stop") == 0.0


def test_reference_answers_are_far_below_the_length_limits() -> None:
    for item in (t for ts in SAMPLE.values() for t in ts):
        assert len(reference(item)) * 4 <= answer_char_limit(item.dataset)


def test_overlong_answers_score_zero_without_running_the_scorer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logic = next(t for t in ONE_PER_DATASET if t.dataset == "propositional_logic")
    calls = []
    real_score = scoring.generator.score
    monkeypatch.setattr(
        scoring.generator, "score", lambda *args: calls.append(args) or real_score(*args)
    )
    # ~15 s if handed to propositional_logic's parser
    assert score_completion(logic, f"<answer>{'¬' * 8000}P</answer>", finish_reason="stop") == 0.0
    assert calls == []  # refused by its length before any scorer ran
    arithmetic = SAMPLE["smol-easy"][0]
    padded = " " * 10 + arithmetic.answer + " " * 10  # stripped: still scores
    assert score_completion(arithmetic, f"<answer>{padded}</answer>", finish_reason="stop") == 1.0
    long = arithmetic.answer + "0" * answer_char_limit(arithmetic.dataset)
    assert score_answer(arithmetic, long) == 0.0


def test_a_scorer_that_raises_gives_zero_and_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(*args: object) -> float:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(generator, "score", explode)
    item = SAMPLE["smol-easy"][0]
    with caplog.at_level(logging.DEBUG, logger=scoring.__name__):
        assert score_completion(item, tagged(item.answer), finish_reason="stop") == 0.0
    assert "RecursionError" in caplog.text


@pytest.mark.parametrize(
    ("value", "expected"),
    [(float("nan"), 0.0), (float("inf"), 0.0), (1.5, 1.0), (-2, 0.0), (True, 1.0), (0.25, 0.25)],
)
def test_scorer_values_are_clamped_floats(
    monkeypatch: pytest.MonkeyPatch, value: object, expected: float
) -> None:
    monkeypatch.setattr(generator, "score", lambda *args: value)
    result = score_completion(SAMPLE["smol-easy"][0], "<answer>1</answer>", finish_reason="stop")
    assert type(result) is float and result == expected


fragments = st.sampled_from(
    [
        "<answer>",
        "</answer>",
        "<",
        ">",
        "/",
        "¬",
        "∧",
        "∨",
        "→",
        "↔",
        "(",
        ")",
        "P",
        "Q",
        "Z",
        "0",
        "1",
        "-",
        ".",
        "e",
        "9" * 30,
        "$\\frac{",
        "}{",
        "}$",
        "Monday",
        " ",
        "\n",
        "\x00",
        "\ud800",
        "🎉",
        "nan",
        "inf",
        "[",
        "]",
        ",",
        "0x",
        "1/0",
    ]
)
garbage = st.one_of(
    st.text(max_size=2_000),
    st.lists(fragments, max_size=60).map("".join),
    st.lists(fragments, max_size=60).map(lambda parts: "<answer>" + "".join(parts) + "</answer>"),
    st.binary(max_size=500).map(lambda b: b.decode("latin-1")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=garbage)
def test_scoring_never_raises_on_garbage(text: str) -> None:
    for item in ONE_PER_DATASET:
        value = score_completion(item, text, finish_reason="stop")
        assert type(value) is float and 0.0 <= value <= 1.0


def test_one_item_of_every_paper_dataset_is_fuzzed() -> None:
    assert {t.dataset for t in ONE_PER_DATASET} == {e.dataset for e in PRESETS["paper"].entries}
