"""GRPOTrainer.step on the tiny model: what moves, what does not, and edge cases of the groups."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings  # noqa: E402
from node.policy.grpo import (  # noqa: E402
    GRPOConfig,
    GRPOTrainer,
    ScoredGroup,
    TokenizedCompletion,
    collate,
    completion_logprobs,
    prompt_token_ids,
    trainable_parameters,
)
from node.policy.model import BaseModel, tiny_model  # noqa: E402
from tests.policy.texts import stopped  # noqa: E402

QUESTION = [{"role": "user", "content": "What is 2 + 2? Answer in <answer></answer> tags."}]
ANSWERS = stopped(["<answer>4</answer>", "<answer>5</answer>", "4", "I do not know, sorry.", "", "22"])
REWARDS = [1.0, 0.0, 0.5, 0.0, 0.0, 0.0]


@pytest.fixture
def pool(tokenizer) -> AdapterPool:  # type: ignore[no-untyped-def]
    """Two nodes' LoRA adapters (r 8, attention projections) over a fresh frozen tiny Llama."""
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    pool = AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tokenizer))
    lora = LoraSettings(rank=8, alpha=16)
    pool.add("alice", lora, OptimizerSettings(lr=1e-3), seed=1)
    pool.add("bob", lora, seed=2)
    return pool


@pytest.fixture
def policy(pool: AdapterPool):  # type: ignore[no-untyped-def]
    """The peft model with alice's adapter active (the only trainable parameters)."""
    with pool.activate("alice") as model:
        yield model


#: GRPO's defaults, with completions cut at 256 tokens (more than any here), in float32 (exact
#: comparisons; bf16 autocast has its own tests in test_together.py).
CONFIG = GRPOConfig(max_completion_tokens=256, precision="float32")


def make_trainer(policy, tokenizer, lr: float = 1e-3, **config) -> GRPOTrainer:  # type: ignore[no-untyped-def]
    optimizer = torch.optim.AdamW(trainable_parameters(policy), lr=lr)
    config.setdefault("max_completion_tokens", CONFIG.max_completion_tokens)
    config.setdefault("precision", CONFIG.precision)
    return GRPOTrainer(policy, tokenizer, GRPOConfig(**config), optimizer)


def groups() -> list[ScoredGroup]:
    other = [{"role": "user", "content": "Say hi."}]
    return [
        ScoredGroup(QUESTION, ANSWERS, REWARDS),
        ScoredGroup(other, stopped(["hi", "hello there", "bye"]), [1.0, 1.0, 0.0]),
    ]


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def moved(before: dict[str, torch.Tensor], model: torch.nn.Module) -> set[str]:
    return {n for n, p in model.named_parameters() if not torch.equal(before[n], p.detach())}


def test_every_lora_parameter_moves_and_nothing_else(pool, policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    trainer = GRPOTrainer(policy, tokenizer, CONFIG, optimizer=pool.optimizer("alice"))
    before = snapshot(policy)
    lora = {n for n, _ in policy.named_parameters() if ".alice." in n}
    assert len(lora) == 2 * 4 * 2  # (A, B) x 4 projections x 2 layers

    first = trainer.step(groups())
    # LoRA's B starts at zero, so A has no gradient in the first step: only B moves.
    assert moved(before, policy) == {n for n in lora if "lora_B" in n}
    second = trainer.step(groups())
    assert moved(before, policy) == lora  # neither the base nor bob's adapter moved
    for metrics in (first, second):
        assert not metrics.skipped and math.isfinite(metrics.loss) and metrics.grad_norm > 0
        assert metrics.num_groups == 2 and metrics.num_sequences == 9


def test_micro_batches_do_not_change_loss_or_gradients(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    make_trainer(policy, tokenizer, lr=1e-2).step(groups())  # B != 0
    results = []
    for micro_batch_size in (9, 4, 1):
        config = GRPOConfig(
            micro_batch_size=micro_batch_size,
            beta=0.1,
            max_grad_norm=1e9,
            max_completion_tokens=256,
            precision="float32",
        )
        frozen = torch.optim.SGD(trainable_parameters(policy), lr=0.0)
        metrics = GRPOTrainer(policy, tokenizer, config, optimizer=frozen).step(groups())
        grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.requires_grad}
        results.append((metrics, grads))
    (reference, reference_grads), *others = results
    assert reference.kl is not None and reference.kl > 0
    for metrics, grads in others:
        assert metrics.loss == pytest.approx(reference.loss, rel=1e-5, abs=1e-7)
        assert metrics.kl == pytest.approx(reference.kl, rel=1e-5)
        assert metrics.num_tokens == reference.num_tokens
        for name, grad in grads.items():
            assert torch.allclose(grad, reference_grads[name], rtol=1e-4, atol=1e-7), name


def test_all_equal_rewards_make_no_update(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    trainer = GRPOTrainer(policy, tokenizer, CONFIG)
    before = snapshot(policy)
    flat = [
        ScoredGroup(QUESTION, ANSWERS[:3], [1.0, 1.0, 1.0]),
        ScoredGroup(QUESTION, ANSWERS[3:], [0.0, 0.0, 0.0]),
        ScoredGroup(QUESTION, stopped(["<answer>4</answer>"]), [1.0]),  # one: no signal
    ]
    metrics = trainer.step(flat)
    assert metrics.skipped and metrics.num_tokens == 0 and metrics.num_groups == 0
    assert metrics.loss == 0.0 and not math.isnan(metrics.loss)
    assert metrics.mean_reward == pytest.approx(4 / 7)
    assert moved(before, policy) == set()
    assert trainer.optimizer.state == {}  # the optimizer never stepped
    assert trainer.step([]).skipped


def test_groups_without_signal_are_dropped_from_a_mixed_batch(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    mixed = [
        *groups(),
        ScoredGroup(QUESTION, stopped(["a", "b"]), [0.3, 0.3]),
        ScoredGroup([5], stopped(["a"]), [1]),
    ]
    metrics = make_trainer(policy, tokenizer).step(mixed)
    assert metrics.num_groups == 2 and metrics.num_sequences == 9 and not metrics.skipped


def test_empty_and_overlong_completions(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    four = len(tokenizer("4", add_special_tokens=False)["input_ids"])
    group = ScoredGroup(QUESTION, stopped(["", "4", "four " * 200]), [1.0, 0.0, 0.5])
    metrics = make_trainer(policy, tokenizer, max_completion_tokens=16).step([group])
    # empty: one end-of-turn token; "4": its tokens + end of turn; the long one: cut at 16
    assert metrics.num_tokens == 1 + (four + 1) + 16
    assert not metrics.skipped and math.isfinite(metrics.loss) and math.isfinite(metrics.grad_norm)


def test_prompt_as_token_ids_equals_prompt_as_messages(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    frozen = torch.optim.SGD(trainable_parameters(policy), lr=0.0)
    trainer = GRPOTrainer(policy, tokenizer, CONFIG, optimizer=frozen)
    ids = prompt_token_ids(QUESTION, tokenizer)
    as_messages = trainer.step([ScoredGroup(QUESTION, ANSWERS, REWARDS)])
    as_ids = trainer.step([ScoredGroup(ids, ANSWERS, REWARDS)])
    assert as_ids.loss == as_messages.loss and as_ids.num_tokens == as_messages.num_tokens


def test_padding_does_not_change_logprobs(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    short = TokenizedCompletion([1, 2, 3, 4, 5], prompt_length=2, advantage=1.0)
    long = TokenizedCompletion(list(range(10, 40)), prompt_length=5, advantage=1.0)
    cpu = torch.device("cpu")
    with torch.no_grad():
        alone = completion_logprobs(policy, collate([short], 0, cpu), chunk_tokens=7)
        padded = completion_logprobs(policy, collate([short, long], 0, cpu), chunk_tokens=7)
        other_pad = completion_logprobs(policy, collate([short, long], 99, cpu), chunk_tokens=7)
    assert alone.shape == (3,) and padded.shape == (3 + 25,)
    assert torch.allclose(padded[:3], alone, atol=1e-5)
    assert torch.allclose(padded, other_pad, atol=1e-6)


def test_second_iteration_clips_with_a_large_learning_rate(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    one = make_trainer(policy, tokenizer, lr=0.05)
    assert one.step(groups()).clip_fraction == 0.0  # ratio is exactly 1 with one iteration
    two = make_trainer(policy, tokenizer, lr=0.05, num_iterations=2)
    metrics = two.step(groups())
    assert metrics.clip_fraction > 0 and not metrics.skipped


def test_kl_is_zero_before_training_and_positive_after(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    kl_trainer = make_trainer(policy, tokenizer, lr=1e-2, beta=0.1)
    first = kl_trainer.step(groups())  # measured before the update: the adapter is still zero
    assert first.kl == 0.0
    second = kl_trainer.step(groups())
    assert second.kl is not None and second.kl > 0
    assert GRPOTrainer(policy, tokenizer, CONFIG).step(groups()).kl is None  # beta 0: not computed


def test_step_restores_the_training_mode(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    policy.eval()
    make_trainer(policy, tokenizer).step(groups())
    assert not policy.training


def test_a_model_without_an_adapter_is_refused(tokenizer) -> None:  # type: ignore[no-untyped-def]
    frozen = tiny_model(tokenizer).requires_grad_(False)
    with pytest.raises(ValueError, match="LoRA adapter"):
        GRPOTrainer(frozen, tokenizer, CONFIG)


def test_a_model_that_post_processes_logits_is_refused(policy, tokenizer) -> None:  # type: ignore[no-untyped-def]
    policy.config.final_logit_softcapping = 30.0  # as Gemma 2 does: chunked log-probs would miss it
    with pytest.raises(ValueError, match="final_logit_softcapping"):
        make_trainer(policy, tokenizer)
