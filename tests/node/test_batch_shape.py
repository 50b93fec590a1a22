"""A node's own batch has the round's shape (the swarm's rules, whatever the node's configuration
says), so its peers never flag it: produced by the real producer, judged by a peer's real intake
(in process, a scripted learner instead of a model)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from node.config import ConfigError, NodeConfig, with_overrides
from node.learning_data import GeneratedGroup
from node.policy.adapters import LoraSettings
from node.rollouts import RejectReason, decode_batch
from node.round.errors import BatchShapeError
from node.round.inprocess import InProcessSwarm
from node.round.node import SwarmNode
from node.sampling.verdicts import IntakeReport
from node.tasks import TaskItem
from tests.rollouts.factories import BASE, OTHER, PEER
from tests.sampling.batches import TOKENS, stopped

ROUND = 3


class ScriptedLearner:
    """Every other completion gives the reference answer, written with the shipped tokenizer's
    ids; nothing to load or train."""

    model_name = "scripted"
    peer_ids = TOKENS
    base_digest = BASE
    lora = LoraSettings()

    def adapter_state(self) -> dict[str, torch.Tensor]:
        return {"scripted.weight": torch.zeros(2)}

    def generate(
        self, tasks: Sequence[TaskItem], group_size: int, *, seeds: object
    ) -> list[GeneratedGroup]:
        answers = [
            [task.answer if i % 2 == 0 else "no" for i in range(group_size)] for task in tasks
        ]
        return [
            GeneratedGroup(
                prompt_ids=(1,),
                completions=tuple(stopped([f"<answer>{answer}</answer>" for answer in group])),
            )
            for group in answers
        ]

    def restore(self, directory: Path) -> None:
        return None


def node(
    swarm: InProcessSwarm, account: Any, folder: Path, overrides: dict[str, dict[str, Any]]
) -> SwarmNode:
    config = with_overrides(
        NodeConfig(), {**overrides, "model": {"checkpoint_dir": folder / account.address}}
    )
    learner: Any = ScriptedLearner()
    built = SwarmNode(account, swarm.exchange(), learner, config)
    built.start()
    return built


def judged_by_a_peer(
    tmp_path: Path,
    own: dict[str, dict[str, Any]],
    peer: dict[str, dict[str, Any]],
    shape: tuple[int, int] = (8, 8),
) -> tuple[SwarmNode, IntakeReport]:
    swarm = InProcessSwarm(InProcessSwarm.genesis_seed_for(0), round=ROUND, shape=shape)
    producer, judge = node(swarm, PEER, tmp_path, own), node(swarm, OTHER, tmp_path, peer)
    producer.produce(ROUND)
    commitments = producer.exchange.commitments([ROUND])
    return producer, judge.judge_batches(commitments, judge.report(ROUND))


@pytest.mark.parametrize("shape", [(8, 8), (4, 4)], ids=["defaults", "a-small-swarm"])
@pytest.mark.parametrize(
    "settings",
    [{}, {"tasks": {"tasks_per_round": 2}, "sampling": {"group_size": 3}}],
    ids=["default-config", "other-config"],
)
def test_a_node_s_batch_answers_every_task_once_and_its_peers_accept_it(
    tmp_path: Path, settings: dict[str, dict[str, Any]], shape: tuple[int, int]
) -> None:
    """The rules' shape, whatever the node's configuration says (it applies to no swarm)."""
    producer, intake = judged_by_a_peer(tmp_path, settings, {}, shape)
    n, g = producer.batch_shape(ROUND)
    assert (n, g) == shape
    (verdict,) = intake.verdicts
    assert verdict.accepted, verdict.detail
    assert verdict.checked == verdict.agreed == n * g
    digest = producer.exchange.publication(ROUND, producer.address)
    assert digest is not None
    body = decode_batch(producer.exchange.store.get(digest)).body
    assert [group.task.index for group in body.groups] == list(range(n))
    assert {len(group.completions) for group in body.groups} == {g}


def test_a_batch_of_another_shape_than_the_rules_is_flagged(tmp_path: Path) -> None:
    """A producer that answers 4 of the round's 8 tasks (its shape forced, as a cheater's would
    be) is flagged by its peer."""
    swarm = InProcessSwarm(InProcessSwarm.genesis_seed_for(0), round=ROUND)
    producer, judge = node(swarm, PEER, tmp_path, {}), node(swarm, OTHER, tmp_path, {})
    producer.batch_shape = lambda round: (4, 8)  # type: ignore[method-assign]
    producer.produce(ROUND)
    intake = judge.judge_batches(producer.exchange.commitments([ROUND]), judge.report(ROUND))
    (verdict,) = intake.verdicts
    assert verdict.reason is RejectReason.BATCH_SHAPE
    item = verdict.item()
    assert item is not None and item.is_flag


def test_a_round_with_more_tasks_than_the_preset_is_not_published(tmp_path: Path) -> None:
    swarm = InProcessSwarm(InProcessSwarm.genesis_seed_for(0), round=ROUND)
    producer = node(swarm, PEER, tmp_path, {})
    producer.batch_shape = lambda round: (9, 8)  # type: ignore[method-assign]
    with pytest.raises(BatchShapeError, match="derives 8: run a preset with at least 9"):
        producer.produce(ROUND)
    assert producer.exchange.publication(ROUND, producer.address) is None


def test_the_configuration_refuses_more_tasks_than_the_preset_derives() -> None:
    with pytest.raises(ConfigError, match="set at most 8, or leave it empty"):
        with_overrides(NodeConfig(), {"tasks": {"tasks_per_round": 9}})
    assert NodeConfig().batch_shape() == (8, 8)
    assert with_overrides(NodeConfig(), {"tasks": {"tasks_per_round": 4}}).batch_shape() == (4, 8)
