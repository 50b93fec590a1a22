"""The node's policy as the round loop sees it: generate for tasks, train on groups, checkpoint.

A thin seam over ``node.policy``: one node's LoRA adapter and optimizer in an :class:`AdapterPool`
(shared with other in-process nodes in the local swarm, or alone in ``swarm run``), its sampler
settings and its GRPO settings. Nothing here knows the chain or the store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from node.learning_data import GeneratedGroup, ScoredGroup, StepMetrics
from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings
from node.policy.checkpoint import CheckpointInfo, load_checkpoint, save_checkpoint
from node.policy.generation import SamplingConfig, generate_groups
from node.policy.grpo import GRPOConfig, GRPOTrainer
from node.tasks import TaskItem, build_messages


@dataclass(frozen=True)
class LearnerSettings:
    """How one node samples and learns."""

    sampling: SamplingConfig
    grpo: GRPOConfig
    lora: LoraSettings = field(default_factory=LoraSettings)
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)
    seed: int = 0


def derived_seed(*parts: object) -> int:
    """A 62-bit seed from any printable parts (stable across processes, unlike ``hash``)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 2


class Learner:
    """One node's policy: ``name``'s adapter in ``pool`` (added on first use)."""

    def __init__(
        self,
        pool: AdapterPool,
        name: str,
        tokenizer: PreTrainedTokenizerBase,
        settings: LearnerSettings,
        *,
        shared: bool = False,
    ) -> None:
        self.pool = pool
        self.name = name
        self.tokenizer = tokenizer
        self.settings = settings
        # With several nodes in one process the global RNG is everybody's: leave it alone.
        self.shared = shared
        if name not in pool:
            pool.add(
                name, settings.lora, settings.optimizer, seed=derived_seed("lora", settings.seed)
            )

    @property
    def model_name(self) -> str:
        return self.pool.base.name

    def generate(
        self, tasks: Sequence[TaskItem], group_size: int, *, seed: int
    ) -> list[GeneratedGroup]:
        """``group_size`` completions per task, sampled with the current adapter: their texts
        (published) and the prompt and completion token ids (trained on as they are)."""
        prompts = [build_messages(task) for task in tasks]
        with self.pool.activate(self.name) as model:
            return generate_groups(
                model,
                self.tokenizer,
                prompts,
                num_completions=group_size,
                sampling=self.settings.sampling,
                seed=seed,
            )

    def train(self, groups: Sequence[ScoredGroup]) -> StepMetrics:
        """One GRPO update of this node's adapter on ``groups``."""
        with self.pool.activate(self.name) as model:
            trainer = GRPOTrainer(
                model, self.tokenizer, self.settings.grpo, self.pool.optimizer(self.name)
            )
            return trainer.step(groups)

    def save(self, directory: Path, round: int, meta: Mapping[str, Any]) -> Path:
        return save_checkpoint(directory, self.pool, self.name, round=round, meta=meta)

    def restore(self, directory: Path) -> CheckpointInfo | None:
        """Loads the node's last checkpoint, if any (the RNG too, unless the pool is shared)."""
        return load_checkpoint(directory, self.pool, self.name, restore_rng=not self.shared)
