"""What a node remembers between rounds and across restarts, in one atomically written JSON file.

The adapter and optimizer live in the policy checkpoint; this file holds the protocol side:

- ``batches``: the batch this node built for a round (its digest, and whether the chain has it),
  written *before* publishing, so a node restarted mid-round publishes the same bytes or, when the
  chain already has them, nothing at all — never a second, different batch;
- ``seen``: peers' commitments already fetched and judged, so a restart or the next round's scan
  does not judge them twice;
- ``pending``: verdicts not yet attested on-chain (the contract takes one attestation batch per
  attester per round, so they wait until their round is complete);
- ``flagged``: (round, subject) pairs this node flagged, to settle once their window closes;
- ``chain``: the identity of the chain the state belongs to (a reset chain invalidates it all);

Entries older than the attestation window are pruned: nothing can be done with them any more.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from node.chain.models import Address, Attestation, Bytes32
from node.round.errors import StateError

STATE_FILE = "round-state.json"
FORMAT = "swarm.node-state/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OwnBatch(_Model):
    """This node's batch of one round."""

    round: int
    digest: Bytes32
    groups: int
    completions: int
    reward_sum: int
    published: bool = False


class ChainIdentity(_Model):
    """What identifies the chain and deployment a state belongs to."""

    chain_id: int
    coordinator: Address
    deployment_block_hash: Bytes32


class NodeState(_Model):
    """The node's protocol state (see the module docstring)."""

    format: str = FORMAT
    peer: Address
    chain: ChainIdentity
    last_round: int | None = Field(None, description="The last round this node completed.")
    batches: dict[int, OwnBatch] = Field(default_factory=dict)
    seen: dict[int, list[Address]] = Field(default_factory=dict)
    pending: list[Attestation] = Field(default_factory=list)
    flagged: list[tuple[int, Address]] = Field(default_factory=list)

    def has_seen(self, round: int, peer: str) -> bool:
        return peer in self.seen.get(round, [])

    def mark_seen(self, round: int, peer: str) -> None:
        self.seen.setdefault(round, [])
        if peer not in self.seen[round]:
            self.seen[round].append(peer)

    def prune(self, oldest_round: int) -> None:
        """Forgets every round before ``oldest_round``."""
        self.batches = {r: b for r, b in self.batches.items() if r >= oldest_round}
        self.seen = {r: peers for r, peers in self.seen.items() if r >= oldest_round}
        self.pending = [a for a in self.pending if a.round >= oldest_round]


def load_state(directory: Path) -> NodeState | None:
    """The saved state in ``directory``, or None when there is none."""
    path = Path(directory) / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        state = NodeState.model_validate_json(text)
    except ValidationError as exc:
        raise StateError(
            f"{path} is damaged ({exc.error_count()} problems, first: {exc.errors()[0]['msg']}); "
            "move it aside to start this node's protocol state afresh"
        ) from None
    if state.format != FORMAT:
        raise StateError(f"{path} has format {state.format!r}, this node reads {FORMAT!r}")
    return state


def save_state(directory: Path, state: NodeState) -> None:
    """Writes ``state`` atomically (temporary file, fsync, rename)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = json.dumps(json.loads(state.model_dump_json()), indent=1, sort_keys=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{STATE_FILE}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, directory / STATE_FILE)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
