"""Sample batches for the rollouts tests: Anvil's dev keys, a domain, bodies of any shape."""

from __future__ import annotations

from eth_account import Account

from node.chain.eip712 import Domain
from node.rollouts.schema import LoraShape
from node.rollouts import (
    BatchBody,
    Completion,
    Group,
    ModelInfo,
    SignedBatch,
    TaskRecord,
    TaskSource,
    sign_batch,
)

# Anvil's dev accounts #1 and #2 (public test keys, never funded anywhere real).
PEER = Account.from_key("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
OTHER = Account.from_key("0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a")
COORDINATOR = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
#: A deployment's domain: chain, coordinator and the genesis seed as salt (any 32 bytes here).
DOMAIN = Domain(chain_id=31337, verifying_contract=COORDINATOR, salt=bytes(range(32)))


#: A base model's weights digest and an adapter address for batches no model recomputes.
BASE = "0x" + "ba" * 32
ADAPTER = "0x" + "ab" * 32


def model_info(tokenizer: str = "0x" + "cd" * 32, *, base: str = BASE, name: str = "tiny") -> ModelInfo:
    """A batch's model record: ``base`` and ``tokenizer``, the shipped LoRA shape, swarm.sample/1."""
    return ModelInfo(
        name=name,
        base=base,
        adapter=ADAPTER,
        lora=LoraShape(rank=16, alpha=32, targets=["k_proj", "o_proj", "q_proj", "v_proj"]),
        sampler="swarm.sample/1",
        tokenizer=tokenizer,
    )


def make_body(
    *,
    groups: int = 2,
    group_size: int = 4,
    text: str = "<answer>2</answer>",
    round: int = 7,
    peer: str = PEER.address,
    question: str = "What is 1 + 1?",
) -> BatchBody:
    """A valid body with ``groups`` groups of ``group_size`` completions each."""
    return BatchBody(
        chain_id=DOMAIN.chain_id,
        coordinator=COORDINATOR,
        round=round,
        peer=peer,
        model=model_info(name="HuggingFaceTB/SmolLM2-135M-Instruct"),
        tasks=TaskSource(preset="easy-arithmetic", generator="reasoning-gym==0.1.25"),
        groups=[
            Group(
                task=TaskRecord(dataset="basic_arithmetic", index=i, question=question, answer="2"),
                completions=[make_completion(f"{text} #{j}", (j % 3) / 2, j) for j in range(group_size)],
            )
            for i in range(groups)
        ],
    )


def make_completion(text: str, reward: float, j: int = 0) -> Completion:
    """Even ``j``: stopped; odd ``j``: cut at the length limit."""
    if j % 2:
        return Completion(
            text=text, reward=reward, finish_reason="length", token_ids=[9, 8], logprobs=[-2.0, -0.125]
        )
    return Completion(
        text=text,
        reward=reward,
        finish_reason="stop",
        token_ids=[17, 4, 2 + j],
        logprobs=[-0.5, -1.25, 0.0],
    )


def make_batch(**kwargs: object) -> SignedBatch:
    """``make_body(**kwargs)`` signed by PEER in DOMAIN."""
    return sign_batch(make_body(**kwargs), PEER, DOMAIN)  # type: ignore[arg-type]
