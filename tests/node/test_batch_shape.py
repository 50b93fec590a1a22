"""A node's own batch has the round's shape, so its peers never flag it: produced by the real
producer, judged by a peer's real intake (in process, a scripted learner instead of a model)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from node.config import ConfigError, NodeConfig, with_overrides
from node.learning_data import GeneratedCompletion, GeneratedGroup
from node.rollouts import RejectReason, decode_batch
from node.round.errors import BatchShapeError
from node.round.inprocess import InProcessSwarm
from node.round.node import SwarmNode
from node.sampling.verdicts import IntakeReport
from node.tasks import TaskItem
from tests.rollouts.factories import OTHER, PEER

ROUND = 3


class ScriptedLearner:
    """Every other completion gives the reference answer; nothing to load or train."""

    model_name = "scripted"

    def generate(
        self, tasks: Sequence[TaskItem], group_size: int, *, seed: int
    ) -> list[GeneratedGroup]:
        return [
            GeneratedGroup(
                prompt_ids=(1,),
                completions=tuple(
                    GeneratedCompletion(
                        f"<answer>{task.answer if i % 2 == 0 else 'no'}</answer>", (2,), "stop"
                    )
                    for i in range(group_size)
                ),
            )
            for task in tasks
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
    tmp_path: Path, own: dict[str, dict[str, Any]], peer: dict[str, dict[str, Any]]
) -> tuple[SwarmNode, IntakeReport]:
    swarm = InProcessSwarm(InProcessSwarm.genesis_seed_for(0), round=ROUND)
    producer, judge = node(swarm, PEER, tmp_path, own), node(swarm, OTHER, tmp_path, peer)
    producer.produce(ROUND)
    commitments = producer.exchange.commitments([ROUND])
    return producer, judge.judge_batches(commitments, judge.report(ROUND))


@pytest.mark.parametrize(
    "settings",
    [{}, {"tasks": {"tasks_per_round": 4}, "sampling": {"group_size": 4}}],
    ids=["defaults", "a-small-swarm"],
)
def test_a_node_s_batch_answers_every_task_once_and_its_peers_accept_it(
    tmp_path: Path, settings: dict[str, dict[str, Any]]
) -> None:
    producer, intake = judged_by_a_peer(tmp_path, settings, settings)
    n, g = producer.batch_shape(ROUND)
    (verdict,) = intake.verdicts
    assert verdict.accepted, verdict.detail
    assert verdict.checked == verdict.agreed == n * g
    digest = producer.exchange.publication(ROUND, producer.address)
    assert digest is not None
    body = decode_batch(producer.exchange.store.get(digest)).body
    assert [group.task.index for group in body.groups] == list(range(n))
    assert {len(group.completions) for group in body.groups} == {g}


def test_nodes_that_disagree_on_the_shape_flag_each_other(tmp_path: Path) -> None:
    """n and G are the swarm's rules: a node configured with fewer tasks than its peers is
    flagged (until the coordinator's rules carry n and G, every node must set the same)."""
    _, intake = judged_by_a_peer(tmp_path, {"tasks": {"tasks_per_round": 4}}, {})
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
