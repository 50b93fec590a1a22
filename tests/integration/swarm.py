"""Building in-process swarm nodes on the test Anvil: honest, reward-inflating, malformed.

The tiny random model never writes a correct answer, so its groups would all score 0 and carry no
learning signal. :class:`AnsweringLearner` samples real completions from it and appends the
reference answer to every other one: groups then have mixed rewards, so selection, sharing and
GRPO act on them. Everything else (chain, store, verification, training) is the real thing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.learning_data import GeneratedCompletion, GeneratedGroup
from node.policy.adapters import AdapterPool
from node.policy.generation import SamplingConfig
from node.policy.grpo import GRPOConfig
from node.rollouts import encode_batch, sign_batch
from node.rollouts.digest import batch_digest
from node.rollouts.schema import BatchBody, Completion, Group, ModelInfo, TaskRecord, TaskSource
from node.round.learner import Learner, LearnerSettings
from node.round.node import NodeSettings, SwarmNode
from node.round.own import BatchToPublish
from node.storage import ContentStore
from node.tasks import TaskItem, generator_id

ETHER = 10**18

SETTINGS = NodeSettings(
    tasks_per_round=4,
    local_groups=2,
    external_groups=3,
    group_size=4,
    fetch_timeout=5.0,
    fetch_budget=10.0,
)
LEARNER = LearnerSettings(
    sampling=SamplingConfig(max_new_tokens=6),
    grpo=GRPOConfig(max_completion_tokens=16),
)


class AnsweringLearner(Learner):
    """The tiny model's samples, every other one followed by the reference answer."""

    def generate(
        self, tasks: Sequence[TaskItem], group_size: int, *, seed: int
    ) -> list[GeneratedGroup]:
        groups = super().generate(tasks, group_size, seed=seed)
        return [
            replace(
                group,
                completions=tuple(
                    self._answered(c, f" <answer>{task.answer}</answer>") if i % 2 == 0 else c
                    for i, c in enumerate(group.completions)
                ),
            )
            for task, group in zip(tasks, groups)
        ]

    def _answered(self, sample: GeneratedCompletion, suffix: str) -> GeneratedCompletion:
        """``sample`` as if the model had written ``suffix`` before its stop token."""
        stop = sample.token_ids[-1:] if sample.finish_reason == "stop" else ()
        body = sample.token_ids[: len(sample.token_ids) - len(stop)]
        added = tuple(self.tokenizer(suffix, add_special_tokens=False)["input_ids"])
        return replace(sample, text=sample.text + suffix, token_ids=body + added + stop)


class InflatingNode(SwarmNode):
    """Claims reward 1.0 for every completion, right or wrong (signed and committed as such)."""

    def build_batch(
        self, round: int, tasks: Sequence[TaskItem], generated: Sequence[GeneratedGroup]
    ) -> BatchToPublish:
        body = BatchBody(
            chain_id=self.client.domain.chain_id,
            coordinator=self.client.domain.verifying_contract,
            round=round,
            peer=self.address,
            model=ModelInfo(name=self.learner.model_name, adapter_digest=None),
            tasks=TaskSource(preset=self.preset.name, generator=generator_id()),
            groups=[
                Group(
                    task=TaskRecord(
                        dataset=t.dataset, index=t.index, question=t.question, answer=t.answer
                    ),
                    completions=[Completion(text=x, reward=1.0) for x in group.texts],
                )
                for t, group in zip(tasks, generated)
            ],
        )
        data = encode_batch(sign_batch(body, self.client.sender.account, self.client.domain))  # type: ignore[union-attr]
        return BatchToPublish(
            data, batch_digest(data), len(body.groups), body.completion_count, body.reward_sum_milli
        )


class MalformedNode(SwarmNode):
    """Stores and commits bytes that are not a batch at all."""

    def build_batch(
        self, round: int, tasks: Sequence[TaskItem], generated: Sequence[GeneratedGroup]
    ) -> BatchToPublish:
        data = b'{"body": "this is not a batch", "round": ' + str(round).encode() + b"}"
        return BatchToPublish(data, hashlib.sha256(data).digest(), 1, 1, 1000)


def make_node(
    account: LocalAccount,
    *,
    client: CoordinatorClient,
    deployment: Deployment,
    store: ContentStore,
    pool: AdapterPool,
    state_dir: Path,
    name: str,
    node_class: type[SwarmNode] = SwarmNode,
    register: bool = True,
    seed: int = 0,
) -> SwarmNode:
    """A node of ``account`` over the shared ``pool`` (registered with 1 ETH unless told)."""
    if register:
        client.register(name, 1 * ETHER)
    learner = AnsweringLearner(
        pool,
        name,
        pool.base.tokenizer,
        LearnerSettings(sampling=LEARNER.sampling, grpo=LEARNER.grpo, seed=seed),
        shared=True,
    )
    return node_class(client, deployment, store, learner, state_dir, SETTINGS)
