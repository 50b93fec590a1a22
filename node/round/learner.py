"""The node's policy as the round loop sees it: generate for tasks, train on groups, checkpoint.

A thin seam over ``node.policy``: one node's LoRA adapter and optimizer in an :class:`AdapterPool`
(shared with other in-process nodes in the local swarm, or alone in ``swarm run``), its sampler
settings and its GRPO settings. Nothing here knows the chain or the store.

A learner's ``generate`` and ``train`` are calls (:class:`GenerateCall`, :class:`TrainCall`) that
``run_calls`` executes. With a ``rendezvous`` (``node.round.rendezvous``, set by the lockstep
runner) the calls of several in-process nodes meet there and ``run_calls`` runs those over one
pool with equal settings in shared forward passes, each row through its node's adapter
(``AdapterPool.rows``); each node still samples from its own seeds and steps its own optimizer.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import PreTrainedTokenizerBase

from node.learning_data import GeneratedGroup, ScoredGroup, StepMetrics
from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings, base_weights
from node.policy.checkpoint import CheckpointInfo, load_checkpoint, save_checkpoint
from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.grpo import GRPOConfig, GRPOTrainer, TrainShare, train_together
from node.policy.model import encode_prompts
from node.policy.peer_ids import PeerIds
from node.provenance.adapter import weights_digest
from node.provenance.seeds import CompletionSeeds
from node.round.rendezvous import Rendezvous
from node.tasks import TaskItem, build_messages

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class LearnerSettings:
    """How one node samples and learns."""

    sampling: SamplingConfig
    grpo: GRPOConfig
    lora: LoraSettings = field(default_factory=LoraSettings)
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)
    seed: int = 0


_BASE_DIGESTS: weakref.WeakKeyDictionary[AdapterPool, str] = weakref.WeakKeyDictionary()


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
        owner: str = "",
    ) -> None:
        self.pool = pool
        self.name = name
        self.tokenizer = tokenizer
        self.settings = settings
        # With several nodes in one process the global RNG is everybody's: leave it alone.
        self.shared = shared
        self.rendezvous: Rendezvous | None = None
        self.peer_ids = PeerIds(tokenizer)
        """Publishes this tokenizer's digest; turns batches into what is trained on."""
        if name not in pool:
            # The owner's address in the seed: volunteers who keep the default training seed
            # still start from different adapters, so no two publish the same adapter bytes.
            seed = derived_seed("lora", settings.seed, owner)
            pool.add(name, settings.lora, settings.optimizer, seed=seed)

    @property
    def model_name(self) -> str:
        return self.pool.base.name

    @property
    def lora(self) -> LoraSettings:
        return self.settings.lora

    @property
    def base_digest(self) -> str:
        """The base model's weights digest, ``"0x"`` + hex, as a batch names it (computed once
        per pool: 0.5 s for SmolLM2-135M)."""
        digest = _BASE_DIGESTS.get(self.pool)
        if digest is None:
            digest = "0x" + weights_digest(base_weights(self.pool.base.model)).hex()
            _BASE_DIGESTS[self.pool] = digest
        return digest

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """A copy of the adapter's weights as they are now (what the next samples come from)."""
        return self.pool.adapter_state(self.name)

    def generate(
        self, tasks: Sequence[TaskItem], group_size: int, *, seeds: CompletionSeeds
    ) -> list[GeneratedGroup]:
        """``group_size`` completions per task, sampled with the current adapter from ``seeds``
        (per task, one per completion): their texts (published) and the prompt and completion
        token ids (trained on as they are)."""
        call = GenerateCall(self, tuple(tasks), group_size, tuple(tuple(s) for s in seeds))
        return self._run(call)  # type: ignore[no-any-return]

    def train(self, groups: Sequence[ScoredGroup]) -> StepMetrics:
        """One GRPO update of this node's adapter on ``groups``."""
        return self._run(TrainCall(self, tuple(groups)))  # type: ignore[no-any-return]

    def _run(self, call: GenerateCall | TrainCall) -> Any:
        if self.rendezvous is not None:
            return self.rendezvous.submit(call)
        return run_calls([call])[0]

    def save(
        self, directory: Path, round: int, meta: Mapping[str, Any], *, keep_previous: bool = False
    ) -> Path:
        return save_checkpoint(
            directory, self.pool, self.name, round=round, meta=meta, keep_previous=keep_previous
        )

    def restore(self, directory: Path) -> CheckpointInfo | None:
        """Loads the node's last checkpoint, if any (the RNG too, unless the pool is shared)."""
        return load_checkpoint(directory, self.pool, self.name, restore_rng=not self.shared)


@dataclass(frozen=True)
class GenerateCall:
    learner: Learner
    tasks: tuple[TaskItem, ...]
    group_size: int
    seeds: tuple[tuple[bytes, ...], ...]

    def batch_key(self) -> tuple[object, ...]:
        """Calls with equal keys can share forward passes."""
        learner = self.learner
        return ("generate", id(learner.pool), learner.settings.sampling, self.group_size)


@dataclass(frozen=True)
class TrainCall:
    learner: Learner
    groups: tuple[ScoredGroup, ...]

    def batch_key(self) -> tuple[object, ...]:
        return ("train", id(self.learner.pool), self.learner.settings.grpo)


def run_calls(calls: Sequence[GenerateCall | TrainCall]) -> list[Any]:
    """Each call's result; calls with equal ``batch_key`` run together."""
    batches: dict[tuple[object, ...], list[int]] = {}
    for index, call in enumerate(calls):
        batches.setdefault(call.batch_key(), []).append(index)
    results: list[Any] = [None] * len(calls)
    for indices in batches.values():
        batch = [calls[i] for i in indices]
        if isinstance(batch[0], GenerateCall):
            done: list[Any] = _generate([c for c in batch if isinstance(c, GenerateCall)])
        else:
            done = _train([c for c in batch if isinstance(c, TrainCall)])
        for index, result in zip(indices, done, strict=True):
            results[index] = result
    return results


def _generate(calls: list[GenerateCall]) -> list[list[GeneratedGroup]]:
    first = calls[0].learner
    pool, tokenizer, names = first.pool, first.tokenizer, [c.learner.name for c in calls]
    requests = [
        GenerationRequest(
            encode_prompts(tokenizer, [build_messages(task) for task in call.tasks]),
            adapter=call.learner.name,
            completion_seeds=call.seeds,
        )
        for call in calls
    ]
    options = {"num_completions": calls[0].group_size, "sampling": first.settings.sampling}
    if len(calls) == 1:
        with pool.activate(first.name) as model:
            results = generate_together(model, tokenizer, requests, **options)
    else:
        with pool.rows(names) as routing:
            results = generate_together(pool.model, tokenizer, requests, routing=routing, **options)
    return [
        [GeneratedGroup(tuple(p), tuple(c)) for p, c in zip(r.prompt_ids, result, strict=True)]
        for r, result in zip(requests, results, strict=True)
    ]


def _train(calls: list[TrainCall]) -> list[StepMetrics]:
    first = calls[0].learner
    pool, tokenizer, config = first.pool, first.tokenizer, first.settings.grpo
    if len(calls) == 1:
        with pool.activate(first.name) as model:
            return [
                GRPOTrainer(model, tokenizer, config, pool.optimizer(first.name)).step(
                    calls[0].groups
                )
            ]
    shares = [TrainShare(c.groups, pool.optimizer(c.learner.name), c.learner.name) for c in calls]
    with pool.rows([c.learner.name for c in calls], trainable=True) as routing:
        return train_together(pool.model, tokenizer, config, shares, routing=routing)
