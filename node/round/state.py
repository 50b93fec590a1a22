"""What a node remembers between rounds and across restarts, in one atomically written JSON file.

The adapter and optimizer live in the policy checkpoint; this file holds the protocol side:

- ``batches``: the batch this node built for a round (its digest, and whether the chain has it),
  written *before* publishing, so a node restarted mid-round publishes the same bytes or, when the
  chain already has them, nothing at all — never a second, different batch;
- ``judged``: this node's verdict on each peer batch it fetched and verified, by (round, subject),
  so a batch is fetched and judged once, whether for training or for a committee seat, with the
  adapter the batch names (a copied adapter is looked for among them);
- ``ballots``: the verdicts committed (or about to be) for a round, with their salt, written
  *before* ``commitVerdicts``: without the exact items and salt a commitment can never be revealed,
  and a restarted node must reveal what it committed, not commit again;
- ``abstained``: rounds this node judged and had nothing to commit on (no seat, no verdict);
- ``flags``: (round, subject) pairs this node flagged in a revealed ballot, to settle and resolve
  once their round is settleable;
- ``chain``: the identity of the chain the state belongs to (a reset chain invalidates it all).

Rounds older than the judging period (J rounds) are pruned: nothing can be done with them any more.
Flags stay until they are resolved (settling may happen any time after the reveal phase).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from node.chain.models import Address, Bytes32, VerdictItem
from node.round.errors import StateError

STATE_FILE = "round-state.json"
FORMAT = "swarm.node-state/2"


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
    adapter: Bytes32 | None = None
    """The store address of the adapter the batch was sampled with (released once the batch
    can no longer be judged)."""


class ChainIdentity(_Model):
    """What identifies the chain and deployment a state belongs to."""

    chain_id: int
    coordinator: Address
    deployment_block_hash: Bytes32


class Judged(_Model):
    """This node's verdict on one peer batch. ``checked == 0``: judged, but there is nothing to
    vote (a batch this node cannot judge, e.g. of a task preset it does not know)."""

    checked: int = Field(0, ge=0)
    agreed: int = Field(0, ge=0)
    verified_reward_sum: int = 0
    adapter: Bytes32 | None = None
    """The adapter address the batch names (a seat looks for copies among those it knows)."""

    def item(self, subject: str) -> VerdictItem | None:
        """The verdict as a ballot item, or None when there is nothing to vote."""
        if self.checked == 0:
            return None
        return VerdictItem(
            subject=subject,
            checked=self.checked,
            agreed=self.agreed,
            verified_reward_sum=self.verified_reward_sum,
        )


class Ballot(_Model):
    """This node's verdicts on the batches of one round, as committed and to be revealed."""

    round: int
    items: list[VerdictItem]
    salt: Bytes32
    committed: bool = False
    revealed: bool = False


class NodeState(_Model):
    """The node's protocol state (see the module docstring)."""

    format: str = FORMAT
    peer: Address
    chain: ChainIdentity
    last_round: int | None = Field(None, description="The last round this node completed.")
    batches: dict[int, OwnBatch] = Field(default_factory=dict)
    judged: dict[int, dict[Address, Judged]] = Field(default_factory=dict)
    ballots: dict[int, Ballot] = Field(default_factory=dict)
    abstained: list[int] = Field(default_factory=list)
    recomputed: list[int] = Field(
        default_factory=list, description="Rounds whose committee recomputes this node has done."
    )
    flags: list[tuple[int, Address]] = Field(default_factory=list)

    def verdict(self, round: int, peer: str) -> Judged | None:
        """This node's cached verdict on ``peer``'s batch of ``round``, if judged."""
        return self.judged.get(round, {}).get(peer)

    def record(self, round: int, peer: str, judged: Judged) -> None:
        self.judged.setdefault(round, {})[peer] = judged

    def decided(self, round: int) -> bool:
        """True once this node has a ballot for ``round`` or nothing to commit on it."""
        return round in self.ballots or round in self.abstained

    def prune(self, oldest_round: int) -> None:
        """Forgets every round before ``oldest_round`` (flags stay until resolved)."""
        self.batches = {r: b for r, b in self.batches.items() if r >= oldest_round}
        self.judged = {r: j for r, j in self.judged.items() if r >= oldest_round}
        self.ballots = {r: b for r, b in self.ballots.items() if r >= oldest_round}
        self.abstained = [r for r in self.abstained if r >= oldest_round]
        self.recomputed = [r for r in self.recomputed if r >= oldest_round]


def load_state(directory: Path) -> NodeState | None:
    """The saved state in ``directory``, or None when there is none."""
    path = Path(directory) / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        found = json.loads(text).get("format")
    except (ValueError, AttributeError):
        found = None
    if isinstance(found, str) and found != FORMAT:
        raise StateError(
            f"{path} has format {found!r}, this node reads {FORMAT!r} (protocol v2): move it "
            "aside to start this node's protocol state afresh"
        )
    try:
        state = NodeState.model_validate_json(text)
    except ValidationError as exc:
        raise StateError(
            f"{path} is damaged ({exc.error_count()} problems, first: {exc.errors()[0]['msg']}); "
            "move it aside to start this node's protocol state afresh"
        ) from None
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
