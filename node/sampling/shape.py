"""The one shape of a round's batches: a group per task 0..n-1, in order, G completions each.

n (tasks per round) and G (completions per task) are rules of the round, the same for every peer.
Without them a peer could answer only the tasks it finds easy, or pad the groups it gets right,
and claim several times an honest batch; with them a batch claims at most n * G * 1000
milli-units, what an honest batch with every answer right claims (docs/PROTOCOL.md, "Verifying a
batch").
"""

from __future__ import annotations

from node.rollouts.limits import MAX_COMPLETIONS_PER_GROUP, MAX_GROUPS
from node.rollouts.reasons import BatchRejected, RejectReason
from node.rollouts.schema import BatchBody

def check_round_rules(tasks_per_round: int, group_size: int) -> None:
    """Raises ValueError unless (n, G) can shape a valid batch (the document's limits)."""
    if not 1 <= tasks_per_round <= MAX_GROUPS:
        raise ValueError(f"tasks per round {tasks_per_round}: must be 1..{MAX_GROUPS}")
    if not 1 <= group_size <= MAX_COMPLETIONS_PER_GROUP:
        raise ValueError(f"group size {group_size}: must be 1..{MAX_COMPLETIONS_PER_GROUP}")


def check_shape(body: BatchBody, tasks_per_round: int, group_size: int) -> None:
    """BatchRejected (``batch_shape``, ``wrong_group_size``) unless ``body`` has the shape."""
    indexes = [group.task.index for group in body.groups]
    if indexes != list(range(tasks_per_round)):
        raise BatchRejected(RejectReason.BATCH_SHAPE, _describe_indexes(indexes, tasks_per_round))
    sizes = sorted({len(group.completions) for group in body.groups})
    if sizes != [group_size]:
        raise BatchRejected(
            RejectReason.WRONG_GROUP_SIZE,
            f"groups of {', '.join(map(str, sizes))} completions; the round's G is {group_size}",
        )


def _describe_indexes(indexes: list[int], tasks_per_round: int) -> str:
    if len(indexes) != tasks_per_round:
        return (
            f"{len(indexes)} groups; the round has {tasks_per_round} tasks, one group each "
            f"(tasks 0..{tasks_per_round - 1})"
        )
    position = next(i for i, index in enumerate(indexes) if index != i)
    return (
        f"group {position} answers task {indexes[position]}; group i must answer task i "
        f"(0..{tasks_per_round - 1}, each once, in order)"
    )
