"""Batched generation on the tiny random model: padding, stopping, groups, seeds, limits.

With tied embeddings a random two-layer model greedily repeats its last input token, so greedy
comparisons use ``chatty``: the same model with its own random output layer, whose greedy
completions depend on the whole prompt.
"""

from __future__ import annotations

import copy

import pytest
import torch

from node.policy.generation import SamplingConfig, generate, generate_from_ids
from node.policy.model import encode_prompts

SHORT = [{"role": "user", "content": "Hi"}]
LONG = [
    {"role": "system", "content": "Solve the problem and answer between <answer> tags."},
    {"role": "user", "content": "Calculate 22 - 99, then add 17 and divide the result by 3."},
]
GREEDY = SamplingConfig(max_new_tokens=12, temperature=0)


@pytest.fixture(scope="module")
def chatty(tiny_base):
    model = copy.deepcopy(tiny_base.model)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        head = torch.randn_like(model.lm_head.weight)  # (V, H), no longer the embeddings
    model.lm_head.weight = torch.nn.Parameter(head, requires_grad=False)
    return model


def texts(groups) -> list[list[str]]:
    return [[c.text for c in group] for group in groups]


def test_left_padding_does_not_change_a_prompt_s_greedy_completion(chatty, tokenizer) -> None:
    model, tok = chatty, tokenizer
    alone = generate(model, tok, [SHORT], num_completions=1, sampling=GREEDY, seed=0)
    beside = generate(model, tok, [LONG, SHORT], num_completions=1, sampling=GREEDY, seed=0)
    long_alone = generate(model, tok, [LONG], num_completions=1, sampling=GREEDY, seed=0)
    assert beside[1][0].token_ids == alone[0][0].token_ids
    assert beside[0][0].token_ids == long_alone[0][0].token_ids
    assert alone[0][0].token_ids != long_alone[0][0].token_ids


def test_micro_batches_and_length_sorting_keep_results_in_order(chatty, tokenizer) -> None:
    model, tok = chatty, tokenizer
    prompts = [LONG, SHORT, [{"role": "user", "content": "Name a colour."}], LONG[1:]]
    one_batch = generate(model, tok, prompts, num_completions=2, sampling=GREEDY, seed=0)
    small = SamplingConfig(max_new_tokens=12, temperature=0, max_batch_sequences=2)
    chunked = generate(model, tok, prompts, num_completions=2, sampling=small, seed=0)
    singly = [generate(model, tok, [p], num_completions=2, sampling=GREEDY)[0] for p in prompts]
    assert texts(one_batch) == texts(chunked) == texts(singly)


def test_g_completions_per_prompt_differ_when_sampled(tiny_base) -> None:
    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0)
    groups = generate(
        tiny_base.model,
        tiny_base.tokenizer,
        [SHORT, LONG],
        num_completions=5,
        sampling=sampling,
        seed=1,
    )
    assert [len(g) for g in groups] == [5, 5]
    for group in groups:
        assert len({c.token_ids for c in group}) > 1


def test_a_seed_repeats_a_run_and_another_seed_does_not(tiny_base) -> None:
    model, tok = tiny_base.model, tiny_base.tokenizer
    sampling = SamplingConfig(max_new_tokens=10, temperature=1.0, top_p=0.9)

    def run(seed: int) -> list[list[str]]:
        groups = generate(
            model, tok, [SHORT, LONG], num_completions=3, sampling=sampling, seed=seed
        )
        return texts(groups)

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_without_a_seed_the_global_rng_decides_and_is_left_alone_otherwise(tiny_base) -> None:
    model, tok = tiny_base.model, tiny_base.tokenizer
    sampling = SamplingConfig(max_new_tokens=6)
    torch.manual_seed(3)
    first = texts(generate(model, tok, [SHORT], num_completions=2, sampling=sampling))
    torch.manual_seed(3)
    second = texts(generate(model, tok, [SHORT], num_completions=2, sampling=sampling))
    assert first == second
    torch.manual_seed(3)
    expected = torch.rand(1)
    torch.manual_seed(3)
    generate(model, tok, [SHORT], num_completions=2, sampling=sampling, seed=5)
    assert torch.equal(torch.rand(1), expected)  # a seeded call draws nothing from the global RNG


def test_max_new_tokens_is_respected(tiny_base) -> None:
    sampling = SamplingConfig(max_new_tokens=5, temperature=1.0)
    groups = generate_from_ids(
        tiny_base.model,
        tiny_base.tokenizer,
        encode_prompts(tiny_base.tokenizer, [SHORT, LONG]),
        num_completions=4,
        sampling=sampling,
        seed=0,
        stop_ids=[],
    )
    for completion in [c for g in groups for c in g]:
        assert len(completion.token_ids) == 5
        assert completion.finish_reason == "length"
        assert completion.text == tiny_base.tokenizer.decode(list(completion.token_ids))


def test_a_stop_token_ends_only_its_own_sequence(chatty, tokenizer) -> None:
    """Stopping drops a row from the running batch; the rows left must decode exactly as before."""
    model, tok = chatty, tokenizer
    ids = encode_prompts(tok, [SHORT, LONG])
    free = generate_from_ids(model, tok, ids, num_completions=1, sampling=GREEDY, stop_ids=[])
    short, long = free[0][0].token_ids, free[1][0].token_ids
    stop = next(t for t in short[2:] if t not in long)  # ends SHORT's completion, never LONG's
    cut = short.index(stop) + 1
    stopped = generate_from_ids(
        model, tok, ids, num_completions=1, sampling=GREEDY, stop_ids=[stop]
    )
    assert stopped[0][0].token_ids == short[:cut]  # the stop token is kept in the ids...
    assert stopped[0][0].finish_reason == "stop"
    assert stopped[0][0].text == tok.decode(list(short[: cut - 1]))  # ...but not in the text
    alone, beside = stopped[1][0], free[1][0]
    assert (alone.text, alone.token_ids, alone.finish_reason) == (
        beside.text,
        beside.token_ids,
        beside.finish_reason,
    )
    # the log-probs only within float rounding: a smaller batch sums in another order
    assert alone.logprobs == pytest.approx(beside.logprobs, abs=1e-4)


def test_sampled_log_probs_are_the_policys_log_probs_of_the_ids(chatty, tokenizer) -> None:
    """What a batch publishes as the sampler's log-probs: log softmax(logits / T) of each sampled
    id, as a full forward pass over prompt + completion computes them."""
    model, tok = chatty, tokenizer
    prompt = encode_prompts(tok, [SHORT])[0]
    sampling = SamplingConfig(max_new_tokens=6, temperature=0.7)
    (group,) = generate_from_ids(model, tok, [prompt], num_completions=3, sampling=sampling, seed=5)
    for completion in group:
        ids = torch.tensor([prompt + list(completion.token_ids)])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / 0.7
        expected = logits.log_softmax(-1).gather(-1, ids[0, len(prompt) :, None]).squeeze(-1)
        assert completion.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
        assert all(lp <= 0 for lp in completion.logprobs)


def test_end_of_turn_is_a_default_stop(tiny_base) -> None:
    model, tok = tiny_base.model, tiny_base.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    rigged = copy.deepcopy(model)
    with torch.no_grad():  # tied embeddings: make <|im_end|>'s logit dominate everywhere
        rigged.model.norm.weight.fill_(1.0)
        rigged.lm_head.weight[im_end] = rigged.model.embed_tokens.weight.sum(0) * 0 + 50.0
    groups = generate(rigged, tok, [SHORT], num_completions=3, sampling=SamplingConfig(max_new_tokens=256), seed=0)
    for completion in groups[0]:
        assert completion.token_ids == (im_end,)
        assert completion.finish_reason == "stop" and completion.text == ""


def test_a_prompt_without_chat_template_generates(tiny_base, tokenizer) -> None:
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    groups = generate(tiny_base.model, plain, [SHORT], num_completions=2, sampling=GREEDY)
    assert len(groups[0]) == 2 and groups[0][0] == groups[0][1]


def test_empty_prompt_list_gives_nothing(tiny_base) -> None:
    assert generate(tiny_base.model, tiny_base.tokenizer, [], num_completions=4, sampling=GREEDY) == []


def test_the_model_s_training_mode_is_restored(tiny_base) -> None:
    tiny_base.model.train()
    try:
        generate(tiny_base.model, tiny_base.tokenizer, [SHORT], num_completions=1, sampling=GREEDY)
        assert tiny_base.model.training
    finally:
        tiny_base.model.eval()


@pytest.mark.parametrize(
    "settings",
    [
        {"max_new_tokens": 0},
        {"temperature": -0.5},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"max_batch_sequences": 0},
    ],
)
def test_bad_sampling_settings_are_refused(settings) -> None:
    with pytest.raises(ValueError):
        SamplingConfig(**{"max_new_tokens": 8, **settings})


def test_bad_generation_inputs_are_refused(tiny_base) -> None:
    model, tok = tiny_base.model, tiny_base.tokenizer
    with pytest.raises(ValueError, match="num_completions"):
        generate(model, tok, [SHORT], num_completions=0, sampling=GREEDY)
    with pytest.raises(ValueError, match="no tokens"):
        generate_from_ids(model, tok, [[1, 2], []], num_completions=1, sampling=GREEDY)
    with pytest.raises(ValueError, match="1024 positions"):
        generate_from_ids(
            model, tok, [[5] * 1000], num_completions=1, sampling=SamplingConfig(max_new_tokens=100)
        )
    with pytest.raises(ValueError, match="prompt 0"):
        generate(model, tok, [[]], num_completions=1, sampling=GREEDY)


def test_a_tiny_top_p_is_greedy(chatty, tokenizer) -> None:
    model, tok = chatty, tokenizer
    nucleus = SamplingConfig(max_new_tokens=12, temperature=1.0, top_p=1e-6)
    sampled = generate(model, tok, [SHORT, LONG], num_completions=2, sampling=nucleus, seed=3)
    greedy = generate(model, tok, [SHORT, LONG], num_completions=2, sampling=GREEDY)
    assert texts(sampled) == texts(greedy)
