"""Building a :class:`SwarmNode` from a ``NodeConfig`` (what ``swarm run`` does)."""

from __future__ import annotations

from pathlib import Path

import torch
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.config import NodeConfig
from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings
from node.policy.generation import SamplingConfig
from node.policy.grpo import GRPOConfig
from node.policy.model import load_base
from node.round.learner import Learner, LearnerSettings
from node.round.node import NodeSettings, SwarmNode
from node.storage import open_store


def node_settings(config: NodeConfig) -> NodeSettings:
    return NodeSettings(
        preset=config.tasks.preset,
        tasks_per_round=config.tasks.tasks_per_round,
        local_groups=config.sampling.local_groups,
        external_groups=config.sampling.external_groups,
        group_size=config.sampling.group_size,
        strategy=config.sampling.strategy,
        compress=config.storage.compress,
        fetch_timeout=config.storage.fetch_timeout,
        fetch_budget=config.storage.fetch_budget,
        settle_disputes=config.round.settle_disputes,
        seed=config.training.seed,
    )


def learner_settings(config: NodeConfig) -> LearnerSettings:
    generation, training = config.generation, config.training
    return LearnerSettings(
        sampling=SamplingConfig(
            max_new_tokens=generation.max_new_tokens,
            temperature=generation.temperature,
            top_p=generation.top_p,
        ),
        grpo=GRPOConfig(
            beta=training.beta,
            micro_batch_size=training.micro_batch_size,
            max_completion_tokens=generation.max_new_tokens,
        ),
        lora=LoraSettings(rank=training.lora_rank, alpha=training.lora_alpha),
        optimizer=OptimizerSettings(lr=training.learning_rate),
        seed=training.seed,
    )


def build_node(config: NodeConfig, account: LocalAccount) -> SwarmNode:
    """Connects to the chain and the store and loads the base model (minutes on first use)."""
    if config.training.torch_threads:
        torch.set_num_threads(config.training.torch_threads)
    deployment = Deployment.load(config.chain.deployment.expanduser())
    client = CoordinatorClient.connect(
        config.chain.rpc_url, deployment, account=account, timeout=config.chain.rpc_timeout
    )
    store_setting = config.storage.store
    store = open_store(
        Path(store_setting).expanduser() if "://" not in store_setting else store_setting,
        timeout=config.storage.fetch_timeout,
    )
    model = config.model
    base = load_base(model.source, device=model.device, dtype=model.dtype)
    learner = Learner(AdapterPool(base), "node", base.tokenizer, learner_settings(config))
    return SwarmNode(
        client, deployment, store, learner, model.checkpoint_dir.expanduser(), node_settings(config)
    )
