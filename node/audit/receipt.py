"""An audit's result: per batch its digest, the auditor's own check, the committee's votes and
weights, the outcome, and agreement or DISAGREEMENT; as canonical JSON (sorted keys, no spaces,
integers exact: wei and milli-units are JSON integers) with its SHA-256, and as readable lines.

The SHA-256 covers the canonical JSON of the receipt itself (``RoundAudit.document``), so two
auditors who saw the same chain and the same bytes print the same hash.

The lines use the protocol's words (docs/PROTOCOL.md, "Committees, verdicts and disputes"): a
batch is named by its peer (the producer), a vote by its voter, and an outcome is upheld, rejected,
inconclusive, pending (flagged, not settled yet) or not disputed; no value is printed raw as None.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

_ETHER = 10**18
#: Outcomes of a settled dispute (``VerdictState``: Upheld, Rejected, Inconclusive).
SETTLED = ("upheld", "rejected", "inconclusive")
#: The committee's decision in words (``Committee.decision``).
_DECISION_WORDS = {"none": "no verdict counted"}


@dataclass(frozen=True)
class OwnCheck:
    """The auditor's own verdict on a batch (node.sampling.verify)."""

    decision: str  # "agree" | "flag"
    checked: int
    agreed: int
    verified_reward_milli: int
    reason: str | None = None
    detail: str = ""
    provenance: str = "not recomputed"
    """The recompute of every group the re-scoring kept, under the batch's adapter: "passed" and
    how many completions were excluded, or the reason code it failed with. A ``provenance`` or
    ``adapter_mismatch`` failure makes the decision a flag (what the batch and its adapter hold
    prove it); ``adapter_missing`` is shown only: a publisher unpins its adapter once the batch
    leaves the judging window, so an audit after that finds none."""


@dataclass(frozen=True)
class Vote:
    """One committee member's revealed item (counted: VerdictRevealed; else VerdictIgnored)."""

    voter: str  # the event's ``attester``
    checked: int
    agreed: int
    verified_reward_milli: int
    weight: int | None
    counted: bool

    @property
    def is_flag(self) -> bool:
        return self.agreed < self.checked


@dataclass(frozen=True)
class Committee:
    """The committee's tally as the contract holds it (``verdict(round, subject)``) and what it
    decided: ``decision`` flag, agree or none (no vote counted); ``outcome`` the verdict state
    (published, upheld, rejected), ``settled`` whether a flagged batch was settled."""

    votes: tuple[Vote, ...]
    agree_weight: int
    flag_weight: int
    agreers: int
    flaggers: int
    outcome: str
    decision: str
    settled: bool


@dataclass(frozen=True)
class BatchAudit:
    subject: str
    digest: str
    own: OwnCheck
    committee: Committee
    leaderboard: dict[str, Any] | None = None
    disagreements: tuple[str, ...] = ()

    @property
    def agrees(self) -> bool:
        return not self.disagreements


@dataclass(frozen=True)
class RoundAudit:
    round: int
    chain_id: int
    coordinator: str
    block: int = field(metadata={"doc": "the chain's head when the audit read it"})
    batches: tuple[BatchAudit, ...] = ()
    indexer: str | None = None

    @property
    def agrees(self) -> bool:
        return all(batch.agrees for batch in self.batches)

    def document(self) -> dict[str, Any]:
        """The receipt as plain JSON values (what the SHA-256 covers)."""
        data = asdict(self)
        for batch, source in zip(data["batches"], self.batches, strict=True):
            batch["agrees"] = source.agrees
        data["agrees"] = self.agrees
        return data

    def canonical_json(self) -> bytes:
        return canonical(self.document())

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json()).hexdigest()

    def json_report(self) -> str:
        """``{"receipt": ..., "sha256": ...}``, canonical (one line)."""
        return json.dumps(
            {"receipt": self.document(), "sha256": self.sha256},
            sort_keys=True,
            separators=(",", ":"),
        )

    def lines(self) -> list[str]:
        """The receipt for people: one block per batch, then the verdict and the hash."""
        out = [
            (
                f"audit of round {self.round} on chain {self.chain_id}, coordinator "
                f"{self.coordinator}, at block {self.block}: {len(self.batches)} batch(es)"
            )
        ]
        for batch in self.batches:
            out.extend(_batch_lines(batch))
        bad = [b.subject for b in self.batches if not b.agrees]
        out.append(
            "all batches agree with the chain"
            if not bad
            else f"DISAGREEMENT on {len(bad)} batch(es), of peer(s) {', '.join(bad)}"
        )
        out.append(f"receipt sha256 {self.sha256}")
        return out


def canonical(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no whitespace, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _eth(wei: int | None) -> str:
    return "none" if wei is None else f"{wei / _ETHER:.4f} ETH"


def outcome_text(outcome: str | None, flagged: bool) -> str:
    """An outcome in words: a settled one as it is; otherwise (no settlement: the chain's
    "published", the leaderboard's null) pending when a flag waits for settlement, else not
    disputed."""
    if outcome in SETTLED:
        return str(outcome)
    return "pending (flagged, not settled yet)" if flagged else "not disputed (nobody flagged)"


def _board_line(board: dict[str, Any], flagged: bool) -> str:
    """What the leaderboard shows for the batch, in words (an older indexer has no pending)."""
    verified = board.get("verified_reward")
    reward = "none (no committee verdict counted)" if verified is None else f"{verified:.3f}"
    if board.get("pending"):
        return f"  leaderboard pending (outcome not settled yet), verified so far {reward}"
    return f"  leaderboard outcome {outcome_text(board.get('outcome'), flagged)}, verified {reward}"


def _batch_lines(batch: BatchAudit) -> list[str]:
    own, committee = batch.own, batch.committee
    own_text = (
        f"{own.decision} ({own.agreed} of {own.checked} rewards match, verified "
        f"{own.verified_reward_milli / 1000:.3f})"
        + (f" [{own.reason}: {own.detail}]" if own.reason else "")
    )
    flagged = committee.flaggers > 0
    decision = _DECISION_WORDS.get(committee.decision, committee.decision)
    if flagged and not committee.settled:
        decision += " once settled"  # what settling would give by the round's rules
    lines = [
        f"batch of peer {batch.subject}, digest {batch.digest}",
        f"  own check   {own_text}",
        f"  provenance  {own.provenance}",
        (
            f"  committee   {decision}: agree {committee.agreers} "
            f"({_eth(committee.agree_weight)}), flag {committee.flaggers} "
            f"({_eth(committee.flag_weight)}); outcome {outcome_text(committee.outcome, flagged)}"
        ),
    ]
    for vote in committee.votes:
        kind = "flag " if vote.is_flag else "agree"
        counted = "" if vote.counted else " (ignored: no seat)"
        lines.append(
            f"    {kind} by voter {vote.voter} {vote.agreed}/{vote.checked} verified "
            f"{vote.verified_reward_milli / 1000:.3f} weight {_eth(vote.weight)}{counted}"
        )
    if batch.leaderboard is not None:
        lines.append(_board_line(batch.leaderboard, flagged))
    lines.extend(f"  DISAGREEMENT: {text}" for text in batch.disagreements)
    if batch.agrees:
        lines.append("  agreement")
    return lines
