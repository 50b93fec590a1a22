"""Building in-process swarm nodes on the test Anvil: honest, reward-inflating, malformed,
shielding (agrees with a friend's batches whatever they hold).

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
from node.chain.events import EventReader, RolloutsPublished
from node.chain.rpc import RetryPolicy
from node.config import NodeConfig, with_overrides
from node.learning_data import GeneratedCompletion, GeneratedGroup
from node.policy.adapters import AdapterPool
from node.policy.model import end_of_turn_id
from node.policy.peer_ids import written_completion
from node.provenance.seeds import CompletionSeeds
from node.rollouts import encode_batch, sign_batch
from node.rollouts.digest import batch_digest
from node.rollouts.schema import BatchBody, Completion, Group, ModelInfo, TaskRecord, TaskSource
from node.round.exchange import ChainExchange
from node.round.factory import build_node
from node.round.learner import Learner
from node.round.node import SwarmNode
from node.round.own import BatchToPublish
from node.round.report import RoundReport
from node.round.retry import STORE_RETRY
from node.sampling.verdicts import IntakeReport
from node.storage import ContentStore
from node.tasks import TaskItem, generator_id

ETHER = 10**18

#: What the test nodes set differently from a node's defaults (small and fast). The scenarios'
#: nodes answer with :class:`AnsweringLearner`, which writes half of every group by hand (the
#: tiny model never answers right): a forger by construction, whose groups a receiver that
#: recomputes them never trains on. So these nodes do not recompute what they train on; the
#: scenarios of tests/integration/test_provenance.py do.
TEST_NODE = with_overrides(
    NodeConfig(),
    {
        "model": {"source": "tiny"},
        "tasks": {"tasks_per_round": 4},
        "sampling": {
            "local_groups": 2,
            "external_groups": 3,
            "group_size": 4,
            "check_provenance": False,
        },
        "storage": {"fetch_timeout": 5.0, "fetch_budget": 10.0},
        "generation": {"max_new_tokens": 6},
    },
)


class AnsweringLearner(Learner):
    """The model's samples, every other one replaced by the reference answer in the strict
    format (a completion that wrote it and stopped): groups with a learning signal whatever the
    model writes."""

    def generate(
        self, tasks: Sequence[TaskItem], group_size: int, *, seeds: CompletionSeeds
    ) -> list[GeneratedGroup]:
        groups = super().generate(tasks, group_size, seeds=seeds)
        return [
            replace(
                group,
                completions=tuple(
                    self._answer(f"<answer>{task.answer}</answer>") if i % 2 == 0 else c
                    for i, c in enumerate(group.completions)
                ),
            )
            for task, group in zip(tasks, groups)
        ]

    def _answer(self, text: str) -> GeneratedCompletion:
        """A completion that wrote ``text`` and then its end-of-turn token, log-probs 0.
        A tokenizer that cannot write it (the word-level one of the heterogeneous swarm) gives
        its encoding, which decodes to something else: only verifiers with another tokenizer,
        which cannot decode them, judge such a node's batches."""
        try:
            return written_completion(self.tokenizer, text)
        except ValueError:
            ids = tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            ids += (end_of_turn_id(self.tokenizer),)
            return GeneratedCompletion(text, ids, "stop", (0.0,) * len(ids))


class InflatingNode(SwarmNode):
    """Claims reward 1.0 for every completion, right or wrong (signed and committed as such)."""

    def build_batch(
        self,
        round: int,
        tasks: Sequence[TaskItem],
        generated: Sequence[GeneratedGroup],
        model: ModelInfo,
    ) -> BatchToPublish:
        body = BatchBody(
            chain_id=self.exchange.domain.chain_id,
            coordinator=self.exchange.domain.verifying_contract,
            round=round,
            peer=self.address,
            model=model,
            tasks=TaskSource(preset=self.preset.name, generator=generator_id()),
            groups=[
                Group(
                    task=TaskRecord(
                        dataset=t.dataset, index=t.index, question=t.question, answer=t.answer
                    ),
                    completions=[
                        Completion(
                            text=c.text,
                            reward=1.0,
                            finish_reason=c.finish_reason,
                            token_ids=list(c.token_ids),
                            logprobs=[0.0] * len(c.token_ids),
                        )
                        for c in group.completions
                    ],
                )
                for t, group in zip(tasks, generated)
            ],
        )
        data = encode_batch(sign_batch(body, self.account, self.exchange.domain))
        return BatchToPublish(
            data, batch_digest(data), len(body.groups), body.completion_count, body.reward_sum_milli
        )


class ForgingNode(SwarmNode):
    """A plain node with an AnsweringLearner, named for what it is in provenance tests: its
    batches hold answers its model never sampled."""


class WithholdingNode(SwarmNode):
    """Names an adapter it never stores (a forger hoping nobody can recompute its samples)."""

    def _publish_adapter(self, round: int) -> bytes:
        return hashlib.sha256(b"never stored" + round.to_bytes(8, "big")).digest()


class CopyingNode(SwarmNode):
    """Names the adapter ``friend`` published for the round (set ``friend`` after building):
    another node's training passed off as its own."""

    friend: SwarmNode

    def _publish_adapter(self, round: int) -> bytes:
        own = super()._publish_adapter(round)
        record = self.friend.state.batches.get(round)
        return record.adapter if record is not None and record.adapter else own


class WeightCopyingNode(SwarmNode):
    """Samples, honestly, with the weights ``friend`` holds when it produces (loaded over its
    own before each round's batch), so its batch names the very adapter the friend published
    for the round: the friend's training passed off as its own, every sample the sampler's."""

    friend: SwarmNode

    def produce(self, round: int) -> RoundReport:
        self.learner.pool.load_adapter_state(self.learner.name, self.friend.learner.adapter_state())
        return super().produce(round)


class MalformedNode(SwarmNode):
    """Stores and commits bytes that are not a batch at all."""

    def build_batch(
        self,
        round: int,
        tasks: Sequence[TaskItem],
        generated: Sequence[GeneratedGroup],
        model: ModelInfo,
    ) -> BatchToPublish:
        data = b'{"body": "this is not a batch", "round": ' + str(round).encode() + b"}"
        return BatchToPublish(data, hashlib.sha256(data).digest(), 1, 1, 1000)


class CherryPickingNode(SwarmNode):
    """Answers only the round's first task, with twice the group size: a shape the v2 verifier
    credited (it accepted any subset of the tasks, and groups of up to 32)."""

    def batch_shape(self, round: int) -> tuple[int, int]:
        tasks_per_round, group_size = super().batch_shape(round)
        return 1, 2 * group_size


class PaddingNode(SwarmNode):
    """Answers every task, with twice the round's completions per group."""

    def batch_shape(self, round: int) -> tuple[int, int]:
        tasks_per_round, group_size = super().batch_shape(round)
        return tasks_per_round, 2 * group_size


class ShieldingNode(SwarmNode):
    """Judges honestly, except that it always agrees with ``friend``'s batches (a sock puppet
    shielding a cheater: its agreement is reported and penalized once the flags win)."""

    friend: str | None = None

    def judge_batches(
        self, commitments: list[RolloutsPublished], report: RoundReport
    ) -> IntakeReport:
        intake = super().judge_batches(commitments, report)
        state = self._state()
        for c in commitments:
            judged = state.verdict(c.round, c.peer)
            if c.peer == self.friend and judged is not None and judged.checked:
                state.record(c.round, c.peer, judged.model_copy(update={"agreed": judged.checked}))
        return intake


def published_digest(client: CoordinatorClient, round: int, peer: str) -> bytes | None:
    """The digest ``peer`` published for ``round``, from its RolloutsPublished event (the v2
    contract keeps no digest)."""
    reader = EventReader(client.w3, client.address)
    found = reader.read(0, client.block_number(), events=[RolloutsPublished], round=round)
    return next((e.digest for e in found if e.peer == peer), None)


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
    learner_class: type[Learner] = AnsweringLearner,
    register: bool = True,
    seed: int = 0,
    check_provenance: bool = False,
    store_retry: RetryPolicy = STORE_RETRY,
) -> SwarmNode:
    """A node of ``account`` over the shared ``pool`` (registered with 1 ETH unless told)."""
    if register:
        client.register(name, 1 * ETHER)
    config = with_overrides(
        TEST_NODE,
        {
            "model": {"checkpoint_dir": state_dir},
            "training": {"seed": seed},
            "sampling": {"check_provenance": check_provenance},
        },
    )
    return build_node(
        config,
        account,
        ChainExchange(client, deployment, store),
        pool=pool,
        name=name,
        learner_class=learner_class,
        node_class=node_class,
        store_retry=store_retry,
    )
