"""The round's batch shape through the real verifier: n groups, tasks 0..n-1 in order, G each.

The attacks are those a tester measured against the verifier that accepted any distinct task
indexes below the preset's count and any group size up to 32 (a subset of easy tasks with 32
completions each was credited 4.8-8x an honest batch). Each is now a flag over everything it
committed, with its own reason; the honest full batch still passes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.chain.events import RolloutsPublished
from node.chain.models import max_reward_milli
from node.rollouts import Group, RejectReason
from node.rollouts.assemble import score_group
from node.sampling.verdicts import PeerVerdict
from node.sampling.verify import RoundContext, derive_for_preset, verify_batch
from node.tasks import TaskItem
from tests.rollouts.factories import DOMAIN, PEER
from tests.sampling.batches import (
    BASES,
    assert_flagged,
    ROUND,
    TASKS_PER_ROUND,
    TOKENS,
    commitment_for,
    honest_batch,
    republished,
    round_seed,
    stopped,
    tasks_for,
)

G = 8
CONTEXT = RoundContext(
    DOMAIN, ROUND, round_seed(ROUND), tasks_per_round=TASKS_PER_ROUND, group_size=G, tokens=TOKENS,
    bases=BASES,
)
HONEST = honest_batch(PEER, DOMAIN, group_size=G)
TASKS = tasks_for(PEER.address)


def right(task: TaskItem, count: int) -> Group:
    """``count`` completions that all give the reference answer (each claims 1.0, truly)."""
    return score_group(task, stopped([f"It is <answer>{task.answer}</answer>"] * count))


def verdict_of(groups: list[Group]) -> tuple[PeerVerdict, RolloutsPublished]:
    data, commitment = republished(HONEST.batch, groups, PEER, DOMAIN)
    return verify_batch(data, commitment, CONTEXT), commitment


def test_an_honest_full_batch_passes() -> None:
    commitment = commitment_for(HONEST.data, HONEST.batch, peer=PEER.address)
    verdict = verify_batch(HONEST.data, commitment, CONTEXT)
    assert verdict.accepted, verdict.detail
    assert verdict.checked == verdict.agreed == TASKS_PER_ROUND * G
    assert verdict.verified_reward_milli == HONEST.reward_sum_milli
    assert len(verdict.groups) == TASKS_PER_ROUND


def test_every_answer_right_is_the_most_a_batch_can_claim() -> None:
    verdict, commitment = verdict_of([right(task, G) for task in TASKS])
    assert verdict.accepted, verdict.detail
    ceiling = max_reward_milli(TASKS_PER_ROUND, G)
    assert verdict.verified_reward_milli == commitment.reward_sum == ceiling == 64_000


@pytest.mark.parametrize("picked", [(0, 1, 2), (1, 4, 6), (0, 2, 3, 5, 7)])
def test_a_subset_of_the_tasks_is_flagged(picked: tuple[int, ...]) -> None:
    """The measured attack: 3-5 of the 8 tasks, 32 right completions each (claims 96,000-160,000
    milli-units, 1.5-2.5x the most a full batch of G = 8 can claim); a prefix included, which is
    what ``tasks.tasks_per_round`` used to publish."""
    verdict, commitment = verdict_of([right(TASKS[i], 32) for i in picked])
    assert commitment.reward_sum == len(picked) * 32_000
    assert_flagged(verdict, commitment, "batch_shape")
    assert f"{len(picked)} groups; the round has {TASKS_PER_ROUND} tasks" in verdict.detail


def test_one_task_answered_32_times_is_flagged() -> None:
    verdict, commitment = verdict_of([right(TASKS[0], 32)])
    assert commitment.reward_sum == 32_000
    assert_flagged(verdict, commitment, "batch_shape")


def test_padded_groups_are_flagged() -> None:
    verdict, commitment = verdict_of([right(task, 32) for task in TASKS])
    assert_flagged(verdict, commitment, "wrong_group_size")
    assert "groups of 32 completions; the round's G is 8" in verdict.detail


def test_groups_one_short_are_flagged() -> None:
    verdict, commitment = verdict_of([right(task, G - 1) for task in TASKS])
    assert_flagged(verdict, commitment, "wrong_group_size")


def test_one_group_one_short_is_a_malformed_document() -> None:
    groups = [right(task, G) for task in TASKS]
    groups[3] = right(TASKS[3], G - 1)
    verdict, commitment = verdict_of(groups)
    assert_flagged(verdict, commitment, "group_size")  # decoding: the groups differ in size


def test_a_repeated_task_is_flagged() -> None:
    groups = [right(task, G) for task in TASKS]
    groups[7] = groups[6]
    verdict, commitment = verdict_of(groups)
    assert_flagged(verdict, commitment, "batch_shape")
    assert "group 7 answers task 6" in verdict.detail


def test_a_task_index_out_of_range_is_flagged() -> None:
    groups = [right(task, G) for task in TASKS]
    last = groups[7]
    groups[7] = last.model_copy(update={"task": last.task.model_copy(update={"index": 8})})
    verdict, commitment = verdict_of(groups)
    assert_flagged(verdict, commitment, "batch_shape")


def test_groups_out_of_order_are_flagged() -> None:
    groups = [right(task, G) for task in TASKS]
    groups[0], groups[1] = groups[1], groups[0]
    verdict, commitment = verdict_of(groups)
    assert_flagged(verdict, commitment, "batch_shape")
    assert "group 0 answers task 1" in verdict.detail


def test_a_preset_with_fewer_tasks_than_the_round_is_skipped() -> None:
    """The rules ask more of the preset than it derives: no batch under it can be valid, and it
    is not provably the publisher's fault, so it is not judged (and earns nothing)."""
    commitment = commitment_for(HONEST.data, HONEST.batch, peer=PEER.address)

    def six_tasks(seed: bytes, peer: str, preset: str) -> list[TaskItem]:
        return list(derive_for_preset(seed, peer, preset))[:6]

    verdict = verify_batch(HONEST.data, commitment, CONTEXT, derive=six_tasks)
    assert verdict.reason is RejectReason.UNKNOWN_PRESET
    assert "derives 6 tasks per round; the round has 8" in verdict.detail
    assert verdict.item() is None and verdict.verified_reward_milli == 0


@pytest.mark.parametrize("rules", [(0, 8), (65, 8), (8, 0), (8, 33)])
def test_a_round_context_refuses_rules_no_batch_can_meet(rules: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="must be 1.."):
        RoundContext(
            DOMAIN,
            ROUND,
            round_seed(ROUND),
            tasks_per_round=rules[0],
            group_size=rules[1],
            tokens=TOKENS,
            bases=BASES,
        )


def _group(index: int, size: int) -> Group:
    """A right group for task ``index``, also past the derived tasks (then task 7 relabelled)."""
    group = right(TASKS[min(index, len(TASKS) - 1)], size)
    return group.model_copy(update={"task": group.task.model_copy(update={"index": index})})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    indexes=st.lists(st.integers(0, 9), min_size=1, max_size=10),
    size=st.sampled_from([1, G - 1, G, G + 1, 32]),
)
def test_only_the_round_s_shape_is_credited(indexes: list[int], size: int) -> None:
    verdict, _ = verdict_of([_group(i, size) for i in indexes])
    assert 0 <= verdict.verified_reward_milli <= max_reward_milli(TASKS_PER_ROUND, G)
    exact = indexes == list(range(TASKS_PER_ROUND)) and size == G
    assert verdict.accepted == exact
    assert verdict.verified_reward_milli == (max_reward_milli(TASKS_PER_ROUND, G) if exact else 0)
