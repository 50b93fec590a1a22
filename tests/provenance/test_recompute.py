"""The recompute on a tiny random model: honest completions keep every margin, forgeries do not.

``peaked`` is the tiny model with its own random output layer, so its next-token distributions
are peaked like a trained model's (the tied random model's are nearly uniform over 49k tokens).
"""

from __future__ import annotations

import copy

import pytest
import torch

from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.model import encode_prompts
from node.provenance.recompute import group_margins
from node.provenance.seeds import batch_seeds

PEER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
QUESTIONS = ["What is 2 + 3?", "Name a prime.", "Hi", "What is 9 - 7? Think first."]
G = 4
SAMPLING = SamplingConfig(max_new_tokens=10)
TOLERANCE = 1e-4  # the spec's soft tolerance


def with_random_head(model, seed: int):  # type: ignore[no-untyped-def]
    model = copy.deepcopy(model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = torch.randn_like(model.lm_head.weight) * 0.5  # (V, H)
    model.lm_head.weight = torch.nn.Parameter(head, requires_grad=False)
    return model


@pytest.fixture(scope="module")
def peaked(tiny_base):  # type: ignore[no-untyped-def]
    return with_random_head(tiny_base.model, 1)


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:  # type: ignore[no-untyped-def]
    return encode_prompts(tokenizer, [[{"role": "user", "content": q}] for q in QUESTIONS])


def sample(model, tokenizer, prompts, seeds, **sampling):  # type: ignore[no-untyped-def]
    request = GenerationRequest(prompts, completion_seeds=seeds)
    settings = SamplingConfig(**{"max_new_tokens": 10, **sampling})
    (groups,) = generate_together(model, tokenizer, [request], num_completions=G, sampling=settings)
    return [[list(c.token_ids) for c in group] for group in groups]


def worst(model, prompts, completions, seeds) -> list[float]:  # type: ignore[no-untyped-def]
    return [
        m.worst
        for prompt, group, row in zip(prompts, completions, seeds, strict=True)
        for m in group_margins(model, prompt, group, row)
    ]


def seeds_for(round_byte: int) -> list[list[bytes]]:
    return batch_seeds(bytes([round_byte]) * 32, PEER, range(len(QUESTIONS)), G)


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
    forgery: str, peaked, tokenizer, prompts, tiny_base
) -> None:  # type: ignore[no-untyped-def]
    seeds = seeds_for(4)
    if forgery == "other seeds":
        completions = sample(peaked, tokenizer, prompts, seeds_for(5))
    elif forgery == "other model, right seeds":
        completions = sample(with_random_head(tiny_base.model, 2), tokenizer, prompts, seeds)
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
