"""Task derivation (docs/PROTOCOL.md, "Task derivation"): a peer's tasks for a round,
reproducible by any verifier from public inputs only.

For peer P in round r and item i (0 <= i < preset.tasks_per_round), byte for byte::

    seed_i = uint64, first 8 bytes big-endian of keccak256(roundSeed(r) ‖ P ‖ uint32_be(i))
             (32 + 20 + 4 bytes; P is the peer's 20-byte address)
    draw_i = uint64, first 8 bytes big-endian of keccak256("swarm.tasks/draw/1" ‖ uint64_be(seed_i))
             ("swarm.tasks/draw/1" as its 18 ASCII bytes)
    u      = (draw_i >> 11) * 2**-53                  # exactly representable double in [0, 1)
    w      = the entries' weights, or, for a preset with specialties, those of P's specialty
             k = uint64(keccak256("swarm.tasks/specialty/1" ‖ P)[:8]) mod (number of specialties)
    j      = the first entry (preset order) with u * W < c_j, where c_j = w_0 + ... + w_j and
             W = c_{n-1}, all IEEE-754 double additions from left to right; the last entry if
             rounding leaves none
    item_i = reasoning_gym.create_dataset(entries[j].dataset, seed=seed_i, size=1,
                                          **entries[j].config)[0]

The dataset draw is "a PRNG seeded by seed_i" as the v1 protocol asked, but deliberately not
``random.Random(seed_i)``: every reasoning-gym generator builds its item from
``random.Random(seed + idx)`` = ``random.Random(seed_i)`` too, so a draw from that same stream would
correlate which dataset is picked with the item's content. (Measured: in the ``paper`` preset,
``basic_arithmetic`` is drawn when the stream's first word is small, and then every one of its
questions had exactly 2 terms.) A keccak draw under its own domain tag is independent of the item
and easy to reproduce outside Python.

``TaskItem.metadata`` (and ``config`` and ``scoring``) stay local: only dataset, index, question and
answer go into a batch, and a verifier recomputes the rest from the preset the batch names.
"""

from __future__ import annotations

from typing import Any

from eth_utils import is_checksum_address, is_hex_address, keccak, to_canonical_address
from pydantic import BaseModel, ConfigDict, Field

from node.tasks import generator
from node.tasks.errors import InvalidTaskInput
from node.tasks.presets import Preset, ScoringRule, weight_sum

DRAW_DOMAIN = b"swarm.tasks/draw/1"
SPECIALTY_DOMAIN = b"swarm.tasks/specialty/1"
_UINT64 = 2**64
_UINT32 = 2**32


class TaskItem(BaseModel):
    """One derived task: what a batch shows (dataset, index, question, answer) plus what scoring
    and prompting need locally (seed, the preset entry's config, the generator's metadata, the
    preset's scoring rule)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str = Field(description="reasoning-gym dataset name")
    index: int = Field(ge=0, description="position in the peer's task list for the round")
    seed: int = Field(ge=0, lt=_UINT64, description="seed_i of docs/PROTOCOL.md (uint64)")
    question: str = Field(description="the generator's question, verbatim")
    answer: str | None = Field(description="the generator's reference answer (None for some)")
    config: dict[str, Any] = Field(
        default_factory=dict, description="the preset entry's config (local, for scoring)"
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="the generator's metadata (local, for scoring)"
    )
    scoring: ScoringRule = Field(
        default="dataset", description="the preset's scoring rule (local, for scoring)"
    )

    def entry(self) -> dict[str, Any]:
        """The reasoning-gym entry a dataset scorer expects: question, answer, metadata."""
        return {"question": self.question, "answer": self.answer, "metadata": self.metadata}

    def batch_task(self) -> dict[str, Any]:
        """The batch document's ``task`` object (docs/PROTOCOL.md, "Batch document")."""
        return {
            "dataset": self.dataset,
            "index": self.index,
            "question": self.question,
            "answer": self.answer,
        }


def derive_item_seed(round_seed: bytes, peer: str, index: int) -> int:
    """``seed_i`` (docs/PROTOCOL.md): uint64 from keccak256(roundSeed ‖ P (20 bytes) ‖ uint32_be(i))."""
    data = _seed_bytes(round_seed) + _address_bytes(peer) + _uint32_bytes(index)
    return int.from_bytes(keccak(data)[:8], "big")


def peer_specialty(preset: Preset, peer: str) -> int | None:
    """``peer``'s specialty in ``preset`` (the module docstring's k); None without specialties."""
    if not preset.specialties:
        return None
    digest = keccak(SPECIALTY_DOMAIN + _address_bytes(peer))
    return int.from_bytes(digest[:8], "big") % len(preset.specialties)


def draw_entry(preset: Preset, seed: int, specialty: int | None = None) -> int:
    """Index of the preset entry item ``seed`` comes from (the draw in this module's docstring),
    with ``specialty``'s weights (None: the entries' own)."""
    if not 0 <= seed < _UINT64:
        raise InvalidTaskInput(f"item seed must be a uint64, got {seed}")
    weights = preset.weights(specialty)
    draw = int.from_bytes(keccak(DRAW_DOMAIN + seed.to_bytes(8, "big"))[:8], "big")
    threshold = (draw >> 11) * 2.0**-53 * weight_sum(weights)
    cumulative = 0.0
    for j, weight in enumerate(weights):
        cumulative += weight
        if threshold < cumulative:
            return j
    return len(weights) - 1


def derive_task(round_seed: bytes, peer: str, index: int, preset: Preset) -> TaskItem:
    """Item ``index`` of ``peer``'s tasks in the round with ``round_seed``."""
    seed = derive_item_seed(round_seed, peer, index)
    return task_from_seed(seed, index, preset, peer_specialty(preset, peer))


def task_from_seed(
    seed: int, index: int, preset: Preset, specialty: int | None = None
) -> TaskItem:
    """The item of ``preset`` that item seed ``seed`` draws (entry, with ``specialty``'s weights,
    then the entry's generator)."""
    entry = preset.entries[draw_entry(preset, seed, specialty)]
    (raw,) = generator.generate(entry.dataset, entry.config, seed=seed, size=1)
    return TaskItem(
        dataset=entry.dataset,
        index=index,
        seed=seed,
        question=raw["question"],
        answer=raw["answer"],
        config=entry.config,
        metadata=raw["metadata"],
        scoring=preset.scoring,
    )


def derive_tasks(round_seed: bytes, peer: str, preset: Preset) -> list[TaskItem]:
    """``peer``'s ``preset.tasks_per_round`` tasks for the round whose seed is ``round_seed``.

    ``round_seed`` is the contract's ``roundSeed(r)`` (32 bytes; ``node.chain.rounds.round_seed``
    computes it offline); ``peer`` a 20-byte hex address (any case; mixed case must be a valid
    EIP-55 checksum). Deterministic across processes and machines.
    """
    _seed_bytes(round_seed)
    _address_bytes(peer)
    return [derive_task(round_seed, peer, i, preset) for i in range(preset.tasks_per_round)]


def check_task_matches(item: TaskItem, question: object, answer: object) -> bool:
    """Whether a batch's task (question, answer) is exactly the derived ``item``'s.

    Exact string comparison, no normalisation: a receiver drops any group where this is False.
    """
    if not isinstance(question, str) or not (answer is None or isinstance(answer, str)):
        return False
    return question == item.question and answer == item.answer


def _seed_bytes(round_seed: bytes) -> bytes:
    if not isinstance(round_seed, (bytes, bytearray)) or len(round_seed) != 32:
        raise InvalidTaskInput(f"round seed must be 32 bytes, got {round_seed!r}")
    return bytes(round_seed)


def _address_bytes(peer: str) -> bytes:
    if not isinstance(peer, str) or not peer.startswith("0x") or not _is_address(peer):
        raise InvalidTaskInput(
            f"peer must be a 0x-prefixed 20-byte hex address (valid EIP-55 checksum if mixed "
            f"case), got {peer!r}"
        )
    return to_canonical_address(peer)


def _is_address(peer: str) -> bool:
    digits = peer[2:]
    if not is_hex_address(peer):
        return False
    single_case = digits == digits.lower() or digits == digits.upper()
    return single_case or is_checksum_address(peer)


def _uint32_bytes(index: int) -> bytes:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < _UINT32:
        raise InvalidTaskInput(f"item index must be a uint32, got {index!r}")
    return index.to_bytes(4, "big")
