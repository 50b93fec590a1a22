"""Prompts: the system format message, three demonstrations from the task's own generator in a
seed space no task uses, and the question last."""

from __future__ import annotations

import pytest

from node.chain.rounds import round_seed
from node.tasks import (
    PRESETS,
    SYSTEM_PROMPT,
    TaskItem,
    build_messages,
    demonstrations,
    derive_tasks,
    extract_answer,
    generator,
    get_preset,
    score_completion,
)
from node.tasks.prompts import DEMO_POOL_SIZE, DEMOS_PER_PROMPT, demo_seed_base

PEER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def sample(preset_name: str, rounds: int) -> list[TaskItem]:
    preset = get_preset(preset_name)
    return [
        t for r in range(rounds) for t in derive_tasks(round_seed(b"\x55" * 32, r), PEER, preset)
    ]


SAMPLE = {name: sample(name, 30) for name in PRESETS}


@pytest.mark.parametrize("preset_name", sorted(PRESETS))
def test_messages_are_system_three_demonstrations_then_the_question(preset_name: str) -> None:
    for item in SAMPLE[preset_name]:
        messages = build_messages(item)
        assert DEMOS_PER_PROMPT == 3
        assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 3 + ["user"]
        assert all(set(m) == {"role", "content"} for m in messages)
        assert all(isinstance(m["content"], str) and m["content"] for m in messages)
        assert messages[0]["content"] == SYSTEM_PROMPT
        assert messages[-1]["content"] == item.question
        for user, assistant in zip(messages[1:-1:2], messages[2:-1:2], strict=True):
            assert assistant["content"].startswith("<answer>")
            assert assistant["content"].endswith("</answer>")
            assert extract_answer(assistant["content"]) is not None
            assert user["content"] != item.question


def test_system_prompt_states_the_format() -> None:
    assert "<answer>" in SYSTEM_PROMPT and "</answer>" in SYSTEM_PROMPT


@pytest.mark.parametrize("preset_name", sorted(PRESETS))
def test_demonstrations_come_from_the_items_generator_and_score_one(preset_name: str) -> None:
    for item in SAMPLE[preset_name][:40]:
        pool = generator.generate(
            item.dataset,
            item.config,
            seed=demo_seed_base(item.dataset, item.config),
            size=DEMO_POOL_SIZE,
        )
        by_question = {raw["question"]: raw for raw in pool}
        for question, answer in demonstrations(item):
            raw = by_question[question]  # from this dataset and config's pool
            demo_item = TaskItem(
                dataset=item.dataset,
                index=0,
                seed=0,
                question=question,
                answer=raw["answer"],
                config=item.config,
                metadata=raw["metadata"],
            )
            text = f"<answer>{answer}</answer>"
            assert score_completion(demo_item, text, finish_reason="stop") == 1.0


def test_demonstration_seeds_never_meet_task_seeds() -> None:
    for preset in PRESETS.values():
        for entry in preset.entries:
            base = demo_seed_base(entry.dataset, entry.config)
            assert base >= 2**64  # task seeds are uint64; reasoning-gym uses seed + index
            assert base + DEMO_POOL_SIZE < 2**65
    items = [t for ts in SAMPLE.values() for t in ts]
    assert all(t.seed < 2**64 for t in items)


def test_demonstrations_never_show_the_task_itself() -> None:
    # One-digit addition has only 121 questions, so a task can equal a pool item by content:
    # find such tasks and check the prompt skips that demonstration.
    smol = get_preset("smol-easy")
    clashes = 0
    for r in range(400):
        for item in derive_tasks(round_seed(b"\x66" * 32, r), PEER, smol):
            demos = demonstrations(item)
            assert len(demos) == DEMOS_PER_PROMPT
            assert all(q != item.question for q, _ in demos)
            pool = generator.generate(
                item.dataset,
                item.config,
                seed=demo_seed_base(item.dataset, item.config),
                size=DEMO_POOL_SIZE,
            )
            clashes += any(raw["question"] == item.question for raw in pool[:DEMOS_PER_PROMPT])
    assert clashes > 0  # the case above really happened


def test_demonstrations_differ_by_config_and_are_stable() -> None:
    smol = get_preset("smol-easy")
    by_entry = []
    for entry in smol.entries:
        item = next(t for t in SAMPLE["smol-easy"] if t.config == entry.config)
        by_entry.append(demonstrations(item))
        assert demonstrations(item) == by_entry[-1]
        op = entry.config["operators"]
        if op == ["-"]:
            assert all(" - " in q for q, _ in by_entry[-1])
        if op == ["+"]:
            assert all(" + " in q for q, _ in by_entry[-1])
    assert len({tuple(d) for d in by_entry}) == len(smol.entries)


def test_demonstrations_for_a_dataset_without_reference_answers() -> None:
    logic = next(t for t in SAMPLE["paper"] if t.dataset == "propositional_logic")
    assert logic.answer is None
    for _, answer in demonstrations(logic):
        assert answer  # the generator's example conclusion
