"""GRPO learns: a tiny model's mean reward on a trivially verifiable task rises above its start.

The task: for each of two prompts, reward 1 when the completion's first word is a given word (the
one the untrained model says first most often, among those it says at most a quarter of the
time), else 0. Each step samples 16 completions of 4 tokens per prompt with the node's own
sampler, scores their texts, and makes one GRPO update on the two groups, on the token ids
sampled (as a node trains on its own groups). The mean reward of 64 fresh samples per prompt is
measured before and after 20 steps.

The model is a two-layer random Llama like ``tiny_model``, but with untied output embeddings
scaled up so its next-token distribution is peaked like a trained model's. ``tiny_model``'s
distribution is nearly uniform over 49k tokens (its logits are bounded by |h|·|e| ≈ 1.3 with
0.02-scale tied embeddings), so no word starts more than a hundredth of a percent of samples and
there is nothing for GRPO to reinforce.
"""

from __future__ import annotations

import re
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from transformers import LlamaForCausalLM  # noqa: E402

from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings  # noqa: E402
from node.policy.generation import SamplingConfig, generate, generate_groups  # noqa: E402
from node.policy.grpo import GRPOConfig, GRPOTrainer, ScoredGroup  # noqa: E402
from node.policy.model import BaseModel, encode_prompts, tiny_model  # noqa: E402

PROMPTS = [
    [{"role": "user", "content": "Say something."}],
    [{"role": "user", "content": "Name a colour."}],
]
STEPS = 20
LEARNING_RATE = 3e-3
EVAL_SEED = 100_000  # + the test's seed: the same fresh samples before and after training
COMPLETIONS = 16
SAMPLING = SamplingConfig(max_new_tokens=4, temperature=1.0)
LORA = LoraSettings(rank=8, alpha=16)  # attention projections
# A space and a word, as the tokenizer splits text before BPE: a whole word is its own piece, so
# the target word is one token, the one the model is most likely to sample first.
# (The leading space matters: a policy that learns to say "MSE" first soon says "MSEMSE...", whose
# first word is no longer "MSE", and with all rewards 0 nothing is left to learn from.)
FIRST_WORD = re.compile(r" [A-Za-z]+")


def peaked_tiny_model(tokenizer, seed: int) -> LlamaForCausalLM:  # type: ignore[no-untyped-def]
    """``tiny_model`` with an untied output layer scaled x20: a peaked distribution."""
    model = tiny_model(tokenizer, seed=seed, tie_word_embeddings=False).requires_grad_(False)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    return model


def target_word(model, tokenizer) -> str:  # type: ignore[no-untyped-def]
    """The word the reward asks for: among tokens that are a space and a word, the one ``model``
    most likely says first over both prompts, if it says it at most a quarter of the time."""
    probs = 0
    with torch.no_grad():
        for ids in encode_prompts(tokenizer, PROMPTS):
            probs = probs + model(torch.tensor([ids])).logits[0, -1].softmax(-1)  # (V,)
    probs = probs / len(PROMPTS)
    for token in probs.argsort(descending=True).tolist():
        word = tokenizer.decode([token])
        if FIRST_WORD.fullmatch(word) and probs[token] <= 0.25:
            return word
    raise AssertionError("no word token")  # pragma: no cover


def rewards(texts: list[str], target: str) -> list[float]:
    """1 when the text's first word is ``target``: " cat food" scores for " cat", " cats" not."""
    return [1.0 if (m := FIRST_WORD.match(text)) and m.group() == target else 0.0 for text in texts]


def mean_reward(policy, tokenizer, target: str, seed: int) -> float:  # type: ignore[no-untyped-def]
    """Mean reward of 64 fresh samples per prompt (no update)."""
    samples = generate(policy, tokenizer, PROMPTS, num_completions=64, sampling=SAMPLING, seed=seed)
    scores = [r for group in samples for r in rewards([c.text for c in group], target)]
    return sum(scores) / len(scores)


def train(tokenizer, seed: int) -> tuple[float, float, list[float]]:  # type: ignore[no-untyped-def]
    """Mean reward before and after ``STEPS`` updates, and of each step's own samples."""
    pool = AdapterPool(BaseModel("peaked-tiny", peaked_tiny_model(tokenizer, seed), tokenizer))
    pool.add("node", LORA, OptimizerSettings(lr=LEARNING_RATE), seed=seed)
    with pool.activate("node") as policy:
        return train_policy(policy, pool.optimizer("node"), tokenizer, seed)


def train_policy(policy, optimizer, tokenizer, seed: int) -> tuple[float, float, list[float]]:  # type: ignore[no-untyped-def]
    target = target_word(policy, tokenizer)
    before = mean_reward(policy, tokenizer, target, seed=EVAL_SEED + seed)
    config = GRPOConfig(max_completion_tokens=SAMPLING.max_new_tokens)  # samples are never cut
    trainer = GRPOTrainer(policy, tokenizer, config, optimizer)
    history = []
    for step in range(STEPS):
        samples = generate_groups(
            policy,
            tokenizer,
            PROMPTS,
            num_completions=COMPLETIONS,
            sampling=SAMPLING,
            seed=1000 * seed + step,
        )
        groups = [ScoredGroup.generated(g, rewards(list(g.texts), target)) for g in samples]
        history.append(trainer.step(groups).mean_reward)
    after = mean_reward(policy, tokenizer, target, seed=EVAL_SEED + seed)
    return before, after, history


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mean_reward_rises(tokenizer, seed: int) -> None:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    before, after, history = train(tokenizer, seed)
    summary = f"{before:.2f} -> {after:.2f}; steps: " + " ".join(f"{r:.2f}" for r in history)
    print(f"seed {seed}: {summary} ({time.perf_counter() - started:.0f} s)")
    assert before < 0.5, f"the task is solved before training: {summary}"
    assert after > before + 0.3, f"mean reward did not rise: {summary}"
