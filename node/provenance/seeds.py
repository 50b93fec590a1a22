"""The seeded sampler's randomness (docs/PROTOCOL.md, "Seeded sampler"): public values only.

Completion g of task i in peer P's batch of round r, byte for byte::

    s   = keccak256("swarm.sample/1" ‖ roundSeed(r) ‖ P ‖ uint32_be(i) ‖ uint32_be(g))
          (14 + 32 + 20 + 4 + 4 bytes; i is the task's index in P's task list)
    u_t = (uint64_be(keccak256(s ‖ uint32_be(t))[:8]) >> 11) * 2**-53     # t = 0, 1, ...

``u_t`` is an exactly representable double in [0, 1) and picks the token at position t of the
completion (``node.provenance.sampler``). Anyone can recompute every ``u_t`` of every batch, so a
receiver can tell whether a completion's tokens are the ones the publisher's model picks.

Local sampling that publishes nothing (the experiment's evaluation, tests) derives its seeds
from an integer under another domain tag (``local_seeds``), so it never collides with a batch's.
"""

from __future__ import annotations

from collections.abc import Sequence

from eth_utils import is_hex_address, keccak, to_canonical_address

SAMPLER_ID = "swarm.sample/1"
"""The sampler a batch names (``model.sampler``); also the seeds' domain tag."""
SAMPLE_DOMAIN = SAMPLER_ID.encode()
LOCAL_DOMAIN = b"swarm.sample/local/1"
_UINT64 = 2**64

CompletionSeeds = Sequence[Sequence[bytes]]
"""Per prompt, one 32-byte seed per completion."""


def completion_seed(round_seed: bytes, peer: str, task_index: int, completion: int) -> bytes:
    """``s`` of completion ``completion`` of task ``task_index`` in ``peer``'s batch."""
    return keccak(
        SAMPLE_DOMAIN
        + _bytes32(round_seed, "round seed")
        + _address(peer)
        + _uint32(task_index, "task index")
        + _uint32(completion, "completion index")
    )


def batch_seeds(
    round_seed: bytes, peer: str, task_indices: Sequence[int], group_size: int
) -> list[list[bytes]]:
    """The seeds of every completion of ``peer``'s groups for tasks ``task_indices``."""
    return [
        [completion_seed(round_seed, peer, index, g) for g in range(group_size)]
        for index in task_indices
    ]


def local_seeds(seed: int, prompts: int, group_size: int) -> list[list[bytes]]:
    """Seeds for sampling that is never published: from an integer, under ``LOCAL_DOMAIN``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < _UINT64:
        raise ValueError(f"a sampling seed must be a uint64, got {seed!r}")
    base = LOCAL_DOMAIN + seed.to_bytes(8, "big")
    return [
        [keccak(base + _uint32(i, "prompt") + _uint32(g, "completion")) for g in range(group_size)]
        for i in range(prompts)
    ]


def uniform(seed: bytes, position: int) -> float:
    """``u_t`` for position ``position`` of the completion with seed ``seed``."""
    word = keccak(_bytes32(seed, "completion seed") + _uint32(position, "position"))
    return (int.from_bytes(word[:8], "big") >> 11) * 2.0**-53


def uniforms(seed: bytes, count: int) -> list[float]:
    """``u_0 .. u_{count-1}`` of one completion."""
    return [uniform(seed, t) for t in range(count)]


def _bytes32(value: bytes, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise ValueError(f"{what} must be 32 bytes, got {value!r}")
    return bytes(value)


def _address(peer: str) -> bytes:
    if not isinstance(peer, str) or not peer.startswith("0x") or not is_hex_address(peer):
        raise ValueError(f"peer must be a 0x-prefixed 20-byte hex address, got {peer!r}")
    return to_canonical_address(peer)


def _uint32(value: int, what: str) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
        raise ValueError(f"{what} must be a uint32, got {value!r}")
    return value.to_bytes(4, "big")
