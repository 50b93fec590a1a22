"""What the provenance tests share: a peaked tiny model, prompts, seeds, sampling, margins."""

from __future__ import annotations

from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.model import tiny_model
from node.provenance.check import SOFT_TOLERANCE
from node.provenance.model_info import lora_shape
from node.provenance.recompute import group_margins
from node.provenance.seeds import SAMPLER_ID, batch_seeds
from node.rollouts.schema import ModelInfo

PEER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
QUESTIONS = ["What is 2 + 3?", "Name a prime.", "Hi", "What is 9 - 7? Think first."]
G = 4
TOLERANCE = SOFT_TOLERANCE


def peaked_tiny_model(tokenizer, seed: int):  # type: ignore[no-untyped-def]
    """The tiny model with a peaked output layer drawn from ``seed``, frozen (``tiny_model``)."""
    return tiny_model(tokenizer, peaked_head_seed=seed).eval().requires_grad_(False)


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


def learner_model(learner, adapter: bytes) -> ModelInfo:  # type: ignore[no-untyped-def]
    """The model record a batch of ``learner``'s names, with the adapter at ``adapter``."""
    return ModelInfo(
        name=learner.model_name,
        base=learner.base_digest,
        adapter="0x" + adapter.hex(),
        lora=lora_shape(learner.lora),
        sampler=SAMPLER_ID,
        tokenizer=learner.peer_ids.digest,
    )
