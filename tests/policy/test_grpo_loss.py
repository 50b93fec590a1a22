"""GRPO's pieces against values computed by hand: advantages, clipped surrogate, k3, log-probs, masks."""

from __future__ import annotations

import copy
import functools
import math

import pytest

torch = pytest.importorskip("torch")

from torch.utils.checkpoint import checkpoint

from node.learning_data import TextCompletion  # noqa: E402
from node.policy.grpo import (  # noqa: E402
    GRPOConfig,
    ScoredGroup,
    TokenizedCompletion,
    _chunk_logprobs,
    chosen_token_logprobs,
    clipped_surrogate,
    collate,
    completion_token_ids,
    group_advantages,
    k3_kl,
)

# ---------------------------------------------------------------- advantages


def test_advantages_of_a_small_group() -> None:
    # mean 2, population std sqrt(2/3) = 0.81650
    got = group_advantages(torch.tensor([1.0, 2.0, 3.0]), eps=1e-4)
    expected = torch.tensor([-1.0, 0.0, 1.0]) / (math.sqrt(2 / 3) + 1e-4)
    assert torch.allclose(got, expected)
    assert torch.allclose(got, torch.tensor([-1.22459, 0.0, 1.22459]), atol=1e-5)


def test_advantages_of_a_binary_group() -> None:
    # one right of four: mean 0.25, std sqrt(0.25 * 0.75) = 0.43301
    got = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), eps=1e-4)
    assert torch.allclose(got, torch.tensor([1.73165, -0.57722, -0.57722, -0.57722]), atol=1e-5)


def test_advantages_unscaled_are_only_centred() -> None:
    got = group_advantages(torch.tensor([1.0, 2.0, 6.0]), scale=False)
    assert torch.equal(got, torch.tensor([-2.0, -1.0, 3.0]))


@pytest.mark.parametrize("rewards", [[0.5, 0.5, 0.5], [0.0, 0.0], [1.0], []])
def test_groups_without_signal_have_zero_advantage(rewards: list[float]) -> None:
    got = group_advantages(torch.tensor(rewards))
    assert torch.equal(got, torch.zeros(len(rewards)))
    assert not got.isnan().any()


def test_a_group_needs_one_reward_per_completion() -> None:
    with pytest.raises(ValueError, match="one reward per completion"):
        ScoredGroup([1, 2], [TextCompletion("a", "stop"), TextCompletion("b", "stop")], [1.0])


# ---------------------------------------------------------------- clipped surrogate

# ratio inside and outside [1 - 0.2, 1 + 0.28], for positive and negative advantages.
RATIOS = [1.0, 1.5, 0.5, 1.5, 0.5, 1.1]
ADVANTAGES = [1.0, 1.0, 1.0, -1.0, -1.0, -1.0]
# -min(r A, clip(r, 0.8, 1.28) A), and whether the clipped term was the min:
#  r=1.0 A=+1: -min(1.0, 1.0)   = -1.0
#  r=1.5 A=+1: -min(1.5, 1.28)  = -1.28  clipped (too likely already: no push further)
#  r=0.5 A=+1: -min(0.5, 0.8)   = -0.5   (below the range with A>0: still pushed up)
#  r=1.5 A=-1: -min(-1.5,-1.28) = 1.5    (above the range with A<0: still pushed down)
#  r=0.5 A=-1: -min(-0.5,-0.8)  = 0.8    clipped (unlikely already: no push further)
#  r=1.1 A=-1: -min(-1.1,-1.1)  = 1.1
EXPECTED_LOSS = [-1.0, -1.28, -0.5, 1.5, 0.8, 1.1]
EXPECTED_CLIPPED = [False, True, False, False, True, False]
# d loss / d logp = -r A where unclipped, 0 where clipped
EXPECTED_GRAD = [-1.0, 0.0, -0.5, 1.5, 0.0, 1.1]


def test_clipped_surrogate_by_hand() -> None:
    logp = torch.log(torch.tensor(RATIOS)).requires_grad_()
    old_logp = torch.zeros(len(RATIOS))
    loss, clipped = clipped_surrogate(
        logp, old_logp, torch.tensor(ADVANTAGES), eps_low=0.2, eps_high=0.28
    )
    assert torch.allclose(loss, torch.tensor(EXPECTED_LOSS))
    assert clipped.tolist() == EXPECTED_CLIPPED
    loss.sum().backward()
    assert torch.allclose(logp.grad, torch.tensor(EXPECTED_GRAD))


def test_clip_bounds_are_separate() -> None:
    # r = 1.25: inside [0.8, 1.28] (clip-higher), but outside a symmetric 0.2 range.
    logp, old = torch.log(torch.tensor([1.25])), torch.zeros(1)
    adv = torch.ones(1)
    loss, clipped = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.28)
    assert torch.allclose(loss, torch.tensor([-1.25])) and not clipped.any()
    loss, clipped = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.2)
    assert torch.allclose(loss, torch.tensor([-1.2])) and clipped.all()


def test_ratio_one_gives_the_plain_policy_gradient() -> None:
    logp = torch.tensor([-0.3, -2.0, -5.0], requires_grad=True)
    adv = torch.tensor([0.5, -1.0, 2.0])
    loss, clipped = clipped_surrogate(logp, logp.detach(), adv, eps_low=0.2, eps_high=0.28)
    loss.sum().backward()
    assert torch.allclose(loss, -adv) and not clipped.any()
    assert torch.allclose(logp.grad, -adv)


# ---------------------------------------------------------------- k3 KL


def test_k3_by_hand() -> None:
    logp = torch.log(torch.tensor([0.5, 0.25, 0.3]))
    ref = torch.log(torch.tensor([0.25, 0.5, 0.3]))
    # delta = ref - logp: ln(1/2) -> 0.5 + ln 2 - 1; ln 2 -> 2 - ln 2 - 1; 0 -> 0
    expected = torch.tensor([0.5 + math.log(2) - 1, 1 - math.log(2), 0.0])
    assert torch.allclose(k3_kl(logp, ref), expected, atol=1e-6)
    assert torch.allclose(expected, torch.tensor([0.193147, 0.306853, 0.0]), atol=1e-6)


def test_k3_is_never_negative() -> None:
    gen = torch.Generator().manual_seed(0)
    logp, ref = -torch.rand(1000, generator=gen) * 5, -torch.rand(1000, generator=gen) * 5
    assert (k3_kl(logp, ref) >= 0).all()


# ---------------------------------------------------------------- chunked log-probs


@pytest.mark.parametrize("chunk_tokens", [1, 5, 37, 100])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("frozen_head", [True, False])
def test_chunked_logprobs_equal_the_naive_gather(
    chunk_tokens: int, temperature: float, frozen_head: bool
) -> None:
    """A frozen head (the node's) takes the recomputing autograd function, a head that trains
    activation checkpointing; both give the naive values and gradients."""
    gen = torch.Generator().manual_seed(0)
    lm_head = torch.nn.Linear(16, 100, bias=False).requires_grad_(not frozen_head)
    with torch.no_grad():
        lm_head.weight.copy_(torch.randn(100, 16, generator=gen))
    hidden = torch.randn(37, 16, generator=gen, requires_grad=True)  # (N, H)
    targets = torch.randint(0, 100, (37,), generator=gen)  # (N,)
    weights = torch.randn(37, generator=gen)  # an upstream gradient that is not all ones
    inputs = [hidden] if frozen_head else [hidden, lm_head.weight]

    naive = torch.log_softmax(lm_head(hidden) / temperature, -1).gather(-1, targets[:, None])
    naive = naive.squeeze(-1)  # (N,)
    naive_grads = torch.autograd.grad((naive * weights).sum(), inputs)

    chunked = chosen_token_logprobs(
        hidden, targets, lm_head, chunk_tokens=chunk_tokens, temperature=temperature
    )
    chunked_grads = torch.autograd.grad((chunked * weights).sum(), inputs)
    assert torch.allclose(chunked, naive, atol=1e-5)
    for got, want in zip(chunked_grads, naive_grads, strict=True):
        assert torch.allclose(got, want, atol=1e-5)


def test_the_frozen_head_s_gradient_under_bf16_autocast_is_checkpointing_s() -> None:
    """Under autocast the backward recomputes the logits as the forward made them (bf16), as
    checkpointing does."""
    gen = torch.Generator().manual_seed(1)
    lm_head = torch.nn.Linear(32, 300, bias=False).requires_grad_(False)
    with torch.no_grad():
        lm_head.weight.copy_(torch.randn(300, 32, generator=gen))
    hidden = torch.randn(50, 32, generator=gen, requires_grad=True)
    targets = torch.randint(0, 300, (50,), generator=gen)
    fn = functools.partial(_chunk_logprobs, lm_head=lm_head, temperature=1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = checkpoint(fn, hidden, targets, use_reentrant=False)
        got = chosen_token_logprobs(hidden, targets, lm_head, chunk_tokens=64)
    (want_grad,) = torch.autograd.grad(want.sum(), hidden)
    (got_grad,) = torch.autograd.grad(got.sum(), hidden)
    assert torch.equal(got, want)
    assert torch.allclose(got_grad, want_grad, rtol=1e-3, atol=1e-5)


def test_chunked_logprobs_without_gradients() -> None:
    lm_head = torch.nn.Linear(4, 10)
    hidden, targets = torch.randn(6, 4), torch.arange(6)
    with torch.no_grad():
        got = chosen_token_logprobs(hidden, targets, lm_head, chunk_tokens=4)
        want = torch.log_softmax(lm_head(hidden), -1)[torch.arange(6), targets]
    assert torch.allclose(got, want, atol=1e-6)


# ---------------------------------------------------------------- masking


def test_collate_masks_prompt_and_padding() -> None:
    sequences = [
        TokenizedCompletion([5, 6, 7, 8, 9], prompt_length=3, advantage=1.5),
        TokenizedCompletion([5, 10, 11, 12], prompt_length=1, advantage=-0.5),
    ]
    batch = collate(sequences, pad_token_id=0, device=torch.device("cpu"))
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 10, 11, 12, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    # position t predicts token t+1: row 1 predicts 8, 9; row 2 predicts 10, 11, 12
    assert batch.target_mask.tolist() == [[False, False, True, True], [True, True, True, False]]
    assert batch.input_ids[:, 1:][batch.target_mask].tolist() == [8, 9, 10, 11, 12]
    assert batch.token_advantages.tolist() == [1.5, 1.5, -0.5, -0.5, -0.5]
    assert batch.num_tokens == 5


def test_completion_tokens_end_the_turn(tokenizer) -> None:  # type: ignore[no-untyped-def]
    eos = tokenizer.eos_token_id
    words = tokenizer("<answer>4</answer>", add_special_tokens=False)["input_ids"]
    stopped = TextCompletion("<answer>4</answer>", "stop")
    assert completion_token_ids(stopped, tokenizer, 64) == words + [eos]
    # empty: just the end of turn
    assert completion_token_ids(TextCompletion("", "stop"), tokenizer, 64) == [eos]


def test_a_cut_text_gets_no_end_of_turn_whatever_its_length(tokenizer) -> None:  # type: ignore[no-untyped-def]
    words = tokenizer("<answer>4</answer>", add_special_tokens=False)["input_ids"]
    cut = TextCompletion("<answer>4</answer>", "length")
    assert completion_token_ids(cut, tokenizer, 64) == words  # shorter than the limit: no guess


def test_a_bare_string_is_refused(tokenizer) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="TextCompletion"):
        completion_token_ids("<answer>4</answer>", tokenizer, 64)  # type: ignore[arg-type]


def test_completions_end_with_the_turns_end_even_when_eos_differs(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """Llama 3 style: EOS is <|endoftext|> but a turn ends with the chat's end-of-turn token."""
    other = copy.deepcopy(tokenizer)
    other.eos_token = "<|endoftext|>"
    end_of_turn = other.convert_tokens_to_ids("<|im_end|>")
    assert other.eos_token_id != end_of_turn
    stopped = TextCompletion("<answer>4</answer>", "stop")
    assert completion_token_ids(stopped, other, 64)[-1] == end_of_turn


def test_overlong_completion_is_cut_without_an_end(tokenizer) -> None:  # type: ignore[no-untyped-def]
    ids = completion_token_ids(TextCompletion("word " * 100, "stop"), tokenizer, 16)
    assert len(ids) == 16 and tokenizer.eos_token_id not in ids


def test_config_rejects_bad_ranges() -> None:
    with pytest.raises(ValueError):
        GRPOConfig(epsilon_low=1.0, max_completion_tokens=8)
    with pytest.raises(ValueError):
        GRPOConfig(num_iterations=0, max_completion_tokens=8)
    with pytest.raises(ValueError):
        GRPOConfig(unknown_field=1, max_completion_tokens=8)
    with pytest.raises(ValueError, match="max_completion_tokens"):
        GRPOConfig()  # no default: a node's comes from generation.max_new_tokens
