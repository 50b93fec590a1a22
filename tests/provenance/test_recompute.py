"""The recompute on a tiny random model: honest completions keep every margin, forgeries do not."""

from __future__ import annotations

import pytest
import torch

from node.provenance import recompute
from node.provenance.recompute import GroupToCheck, batch_margins, group_margins
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


@pytest.mark.parametrize("positions_per_pass", [1024, 10, 1])
def test_groups_recomputed_together_have_the_margins_they_have_alone(
    positions_per_pass: int, peaked, tokenizer, prompts, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A batch's groups share one prefill and pass (split into passes by the positions one pass
    holds, across groups too): each completion's margins are those of its group alone."""
    seeds = seeds_for(6)
    completions = sample(peaked, tokenizer, prompts, seeds)
    completions[1][0] = completions[1][0][:1]  # completions of other lengths, in one pass
    completions[2][3][1] = (completions[2][3][1] + 1000) % len(tokenizer)  # and a forgery
    alone = [group_margins(peaked, p, c, s) for p, c, s in zip(prompts, completions, seeds)]
    monkeypatch.setattr(recompute, "_POSITIONS_PER_PASS", positions_per_pass)
    groups = [GroupToCheck(p, c, s) for p, c, s in zip(prompts, completions, seeds)]
    together = batch_margins(peaked, groups)
    assert [len(g) for g in together] == [len(c) for c in completions]
    for mine, theirs in zip(together, alone, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert len(a.margins) == len(b.margins)
            assert max(abs(x - y) for x, y in zip(a.margins, b.margins)) < 1e-5
    assert together[2][3].worst < -TOLERANCE < min(m.worst for g in together[:2] for m in g)


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
    honest = GroupToCheck([1, 2], [[3]], [bytes(32)])
    with pytest.raises(ValueError, match="at least one token"):
        batch_margins(peaked, [honest, GroupToCheck([], [[3]], [bytes(32)])])
