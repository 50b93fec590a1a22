"""The one way to build a :class:`SwarmNode`: from a ``NodeConfig``, an account and an exchange.

``swarm run`` builds one node over a :class:`~node.round.exchange.ChainExchange` and loads its
own base model; ``swarm local up`` and the experiment build several over one shared
:class:`AdapterPool` (one base model, one LoRA adapter and optimizer per node), on a chain or
in-process. Every setting comes from the node's ``NodeConfig``; the local swarm and the
experiment express theirs as overrides of it (``node.config.with_overrides``).
"""

from __future__ import annotations

import torch
from eth_account.signers.local import LocalAccount

from node.chain.rpc import RetryPolicy
from node.config import NodeConfig
from node.policy.adapters import LORA_TARGETS, AdapterPool, LoraSettings, OptimizerSettings
from node.policy.generation import SamplingConfig
from node.policy.grpo import GRPOConfig
from node.policy.model import load_base
from node.round.exchange import Exchange
from node.round.learner import Learner, LearnerSettings
from node.round.node import SwarmNode
from node.round.retry import STORE_RETRY


def learner_settings(config: NodeConfig) -> LearnerSettings:
    """How the node samples and learns. GRPO's completion cutoff is the sampler's
    ``max_new_tokens``: a node trains on completions no longer than it would generate."""
    generation, training = config.generation, config.training
    return LearnerSettings(
        sampling=SamplingConfig(
            max_new_tokens=generation.max_new_tokens,
            temperature=generation.temperature,
            top_p=generation.top_p,
        ),
        grpo=GRPOConfig(
            beta=training.beta,
            peer_weight=training.peer_weight,
            peers_only_steps=training.peers_only_steps,
            peer_logprob_gap=training.peer_logprob_gap,
            peer_importance=training.peer_importance,
            peer_importance_cap=training.peer_importance_cap,
            peer_advantage=training.peer_advantage,
            micro_batch_size=training.micro_batch_size,
            max_completion_tokens=generation.max_new_tokens,
            precision=training.precision,
            share_prompts=training.share_prompts,
        ),
        lora=LoraSettings(
            rank=training.lora_rank,
            alpha=training.lora_alpha,
            target_modules=LORA_TARGETS[training.lora_targets],
        ),
        optimizer=OptimizerSettings(lr=training.learning_rate),
        seed=training.seed,
    )


def build_node(
    config: NodeConfig,
    account: LocalAccount,
    exchange: Exchange,
    *,
    pool: AdapterPool | None = None,
    name: str = "node",
    learner_class: type[Learner] = Learner,
    node_class: type[SwarmNode] = SwarmNode,
    store_retry: RetryPolicy = STORE_RETRY,
) -> SwarmNode:
    """A node of ``account`` that reaches the swarm through ``exchange``.

    Without ``pool`` the base model named in ``config.model`` is loaded for this node alone
    (minutes on first use); with one, the node adds its adapter ``name`` to the shared pool.
    ``learner_class`` and ``node_class`` let tests build nodes that behave differently.
    """
    if config.training.torch_threads:
        torch.set_num_threads(config.training.torch_threads)
    shared = pool is not None
    if pool is None:
        model = config.model
        pool = AdapterPool(load_base(model.source, device=model.device, dtype=model.dtype))
    learner = learner_class(
        pool,
        name,
        pool.base.tokenizer,
        learner_settings(config),
        shared=shared,
        owner=account.address,
    )
    return node_class(account, exchange, learner, config, store_retry=store_retry)
