"""The recompute on a tiny random model: honest completions keep every margin, forgeries do not."""

from __future__ import annotations

import pytest
import torch

from node.provenance.recompute import group_margins
from tests.provenance.helpers import (
    G,
    QUESTIONS,
    TOLERANCE,
    peaked_tiny_model,
    sample,
    seeds_for,
    worst,
)


def test_honest_completions_keep_every_margin_at_any_thread_count(
    peaked, tokenizer, prompts
) -> None:  # type: ignore[no-untyped-def]
    seeds = seeds_for(1)
    completions = sample(peaked, tokenizer, prompts, seeds)
    assert len({tuple(c) for group in completions for c in group}) > 8  # they differ
    threads = torch.get_num_threads()
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            assert min(worst(peaked, prompts, completions, seeds)) > -TOLERANCE
    finally:
        torch.set_num_threads(threads)


def test_a_completion_is_the_same_in_any_batch(peaked, tokenizer, prompts) -> None:  # type: ignore[no-untyped-def]
    seeds = seeds_for(2)
    together = sample(peaked, tokenizer, prompts, seeds)
    one_by_one = [sample(peaked, tokenizer, [p], [s])[0] for p, s in zip(prompts, seeds)]
    assert together == one_by_one


def test_an_edited_token_is_caught_where_it_was_edited(peaked, tokenizer, prompts) -> None:  # type: ignore[no-untyped-def]
    seeds = seeds_for(3)
    completions = sample(peaked, tokenizer, prompts, seeds)
    caught = 0
    for i, group in enumerate(completions):
        for g, ids in enumerate(group):
            position = len(ids) // 2
            edited = list(ids)
            edited[position] = (ids[position] + 1000 + 7 * g) % len(tokenizer)  # not a neighbour
            (margins,) = group_margins(peaked, prompts[i], [edited], [seeds[i][g]])
            assert margins.margins[position] < 0  # never the pick
            caught += margins.first_below(TOLERANCE) == position
    assert caught == len(QUESTIONS) * G


@pytest.mark.parametrize("forgery", ["other seeds", "other model, right seeds", "written"])
def test_completions_not_sampled_by_this_model_with_these_seeds_are_caught(
    forgery: str, peaked, tokenizer, prompts
) -> None:  # type: ignore[no-untyped-def]
    seeds = seeds_for(4)
    if forgery == "other seeds":
        completions = sample(peaked, tokenizer, prompts, seeds_for(5))
    elif forgery == "other model, right seeds":
        completions = sample(peaked_tiny_model(tokenizer, 2), tokenizer, prompts, seeds)
    else:
        answer = tokenizer("<answer>5</answer>", add_special_tokens=False)["input_ids"]
        completions = [[answer + [tokenizer.eos_token_id]] * G for _ in prompts]
    margins = worst(peaked, prompts, completions, seeds)
    assert all(m < -TOLERANCE for m in margins), margins


def test_the_recompute_refuses_what_it_cannot_check(peaked) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="2 completions but 1 seeds"):
        group_margins(peaked, [1, 2], [[3], [4]], [bytes(32)])
    with pytest.raises(ValueError, match="at least one token"):
        group_margins(peaked, [1, 2], [[]], [bytes(32)])
