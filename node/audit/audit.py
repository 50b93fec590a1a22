"""Re-verifying one round from the chain and the store, and comparing with what was decided.

For round r (once its reveal phase is over, so the tally is final):

1. the round's ``RolloutsPublished`` events give every batch's digest; ``VerdictRevealed`` and
   ``VerdictIgnored`` the committee's votes and weights; ``verdict(r, subject)`` the tally and the
   state (published, upheld, rejected, inconclusive);
2. every batch is fetched from the configured store by its digest and verified exactly as a node
   verifies it (``node.sampling.intake``: re-hash, decode, signature, body, shape, tasks, re-score
   every completion), and with a model every group it kept is recomputed under the batch's
   adapter (``node.provenance``): the auditor's own check is *flag* (a wrong reward, an invalid
   batch, or completions its publisher's model did not sample) or *agree*; n and G come from the
   round's rules (``rulesAt``);
3. the committee's decision is *flag* when the batch was upheld, *agree* when the flags were
   rejected or nobody flagged, *inconclusive* when neither side won (a flagged batch not settled
   yet gets what settling it would give by the round's rules), *none* when no vote counted; own
   *flag* against committee agree, inconclusive or none, or own *agree* against committee flag,
   is a DISAGREEMENT;
4. with a leaderboard (``indexer_url``), its ``/api/rounds/{r}`` must show every batch with the
   chain's outcome and weights, and the auditor's verified reward where both agree.

A batch that cannot be fetched or judged here (store unreachable, a preset this node does not
know) is an error, not a verdict: ``AuditError``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import requests

from node.audit.receipt import (
    SETTLED,
    BatchAudit,
    Committee,
    OwnCheck,
    RoundAudit,
    Vote,
    outcome_text,
)
from node.chain.client import CoordinatorClient
from node.chain.committee import settle_outcome
from node.chain.events import EventReader, RolloutsPublished, VerdictIgnored, VerdictRevealed
from node.chain.models import Verdict, VerdictState
from node.rollouts.reasons import PROVEN_BY_RECOMPUTE
from node.sampling.intake import intake_round
from node.sampling.tokens import TokenCheck
from node.sampling.verdicts import PeerVerdict
from node.sampling.verify import RoundContext
from node.storage import ContentStore

if TYPE_CHECKING:
    from node.provenance.peer_check import Recomputer


class AuditError(Exception):
    """The audit could not be done (the message says why and what to do)."""


@dataclass(frozen=True)
class AuditSettings:
    per_fetch_timeout: float = 10.0
    total_budget: float = 60.0
    indexer_url: str | None = None
    http_timeout: float = 10.0


def audit_round(
    client: CoordinatorClient,
    store: ContentStore,
    round: int,
    *,
    start_block: int,
    tokens: TokenCheck,
    bases: frozenset[str],
    settings: AuditSettings | None = None,
    recomputer: Recomputer | None = None,
) -> RoundAudit:
    """Audits every batch of ``round`` (``tokens``: the node's tokenizer, which counts and
    decodes the batches' token ids; ``bases``: the weights digests of the base models it judges);
    ``recomputer``: recompute every accepted group under its batch's adapter, for the receipt's
    ``provenance``); raises AuditError when it cannot."""
    settings = settings or AuditSettings()
    head = client.block_number()
    _check_judged(client, round)
    published, votes = _round_events(client, round, start_block, head)
    seed = client.round_seed(round)
    verdicts = _verify(client, store, round, seed, published, tokens, bases, settings)
    board = _leaderboard(settings, round) if settings.indexer_url else None
    batches = tuple(
        _batch_audit(
            client,
            round,
            commitment,
            verdicts[commitment.peer],
            votes,
            board,
            _recomputed(recomputer, verdicts[commitment.peer], seed),
        )
        for commitment in sorted(published, key=lambda c: int(c.peer, 16))
    )
    return RoundAudit(
        round=round,
        chain_id=client.chain_id,
        coordinator=client.address,
        block=head,
        batches=batches,
        indexer=settings.indexer_url,
    )


def _check_judged(client: CoordinatorClient, round: int) -> None:
    phases, current = client.phases(), client.round_now()
    settle_from = phases.settleable_from(round)
    if current < settle_from:
        raise AuditError(
            f"round {round} is not settled yet: its verdicts are revealed until round "
            f"{settle_from - 1} and the chain is in round {current}; audit it from round "
            f"{settle_from} on"
        )


def _round_events(
    client: CoordinatorClient, round: int, start_block: int, head: int
) -> tuple[list[RolloutsPublished], dict[str, list[Vote]]]:
    reader = EventReader(client.w3, client.address)
    events = reader.read(
        start_block,
        head,
        events=[RolloutsPublished, VerdictRevealed, VerdictIgnored],
        round=round,
    )
    published = [e for e in events if isinstance(e, RolloutsPublished)]
    votes: dict[str, list[Vote]] = defaultdict(list)
    for event in events:
        if isinstance(event, (VerdictRevealed, VerdictIgnored)):
            counted = isinstance(event, VerdictRevealed)
            votes[event.subject].append(
                Vote(
                    voter=event.attester,
                    checked=event.checked,
                    agreed=event.agreed,
                    verified_reward_milli=event.verified_reward_sum,
                    weight=event.weight if isinstance(event, VerdictRevealed) else None,
                    counted=counted,
                )
            )
    return published, votes


def _verify(
    client: CoordinatorClient,
    store: ContentStore,
    round: int,
    round_seed: bytes,
    published: Sequence[RolloutsPublished],
    tokens: TokenCheck,
    bases: frozenset[str],
    settings: AuditSettings,
) -> dict[str, PeerVerdict]:
    rules = client.rules_at(round)
    context = RoundContext(
        domain=client.domain,
        round=round,
        round_seed=round_seed,
        tasks_per_round=rules.tasks_per_round,
        group_size=rules.group_size,
        tokens=tokens,
        bases=bases,
    )
    report = intake_round(
        published,
        store,
        context,
        own_address=None,
        per_fetch_timeout=settings.per_fetch_timeout,
        total_budget=settings.total_budget,
    )
    unjudged = [v for v in report.verdicts if v.item() is None]
    if unjudged:
        listed = "; ".join(
            f"{v.peer} ({v.reason.value if v.reason else 'nothing to check'}: {v.detail})"
            for v in unjudged
        )
        raise AuditError(
            f"cannot audit round {round}: {len(unjudged)} batch(es) could not be fetched from "
            f"the store or judged here: {listed}. Check that the store ({store}) is reachable "
            "and holds the round's batches"
        )
    return {verdict.peer: verdict for verdict in report.verdicts}


@dataclass(frozen=True)
class _Recomputed:
    """What recomputing a verdict's kept groups found: in words, and whether it proves a flag."""

    text: str
    flag: tuple[str, str] | None = None  # (reason code, detail)


def _recomputed(
    recomputer: Recomputer | None, verdict: PeerVerdict, round_seed: bytes
) -> _Recomputed:
    if recomputer is None or not verdict.groups:
        return _Recomputed("not recomputed")
    outcome = recomputer.check_batch(verdict.groups, round_seed)
    if outcome.reason is not None:
        code = outcome.reason.value
        proven = (code, outcome.detail) if outcome.reason in PROVEN_BY_RECOMPUTE else None
        return _Recomputed(f"{code}: {outcome.detail}", proven)
    result = outcome.result
    assert result is not None
    total = sum(len(g.completions) for g in verdict.groups)
    return _Recomputed(
        f"passed, {len(result.excluded)} of {total} completions excluded "
        f"(worst margin {result.worst_margin:+.1e})"
    )


def _own_check(verdict: PeerVerdict, recomputed: _Recomputed) -> OwnCheck:
    item = verdict.item()
    assert item is not None
    own = OwnCheck(
        decision="flag" if item.is_flag else "agree",
        checked=item.checked,
        agreed=item.agreed,
        verified_reward_milli=item.verified_reward_sum,
        reason=verdict.reason.value if verdict.reason else None,
        detail=verdict.detail,
        provenance=recomputed.text,
    )
    if own.decision == "agree" and recomputed.flag is not None:
        reason, detail = recomputed.flag
        return replace(
            own, decision="flag", agreed=0, verified_reward_milli=0, reason=reason, detail=detail
        )
    return own


def _why(own: OwnCheck) -> str:
    """Why the auditor's own check flags a batch, in words."""
    if own.reason in PROVEN_BY_RECOMPUTE:
        return f"{own.reason}: its publisher's model did not sample it"
    wrong = f"{own.checked - own.agreed} of {own.checked} claimed rewards wrong"
    return wrong + (f", {own.reason}" if own.reason else "")


def _committee(
    client: CoordinatorClient, round: int, subject: str, votes: Sequence[Vote]
) -> Committee:
    tally = client.verdict(round, subject)
    decision = _decision(client, round, subject, tally)
    return Committee(
        votes=tuple(votes),
        agree_weight=tally.agree_weight,
        flag_weight=tally.flag_weight,
        agreers=tally.agreers,
        flaggers=tally.flaggers,
        outcome=tally.state.name.lower(),
        decision=decision,
        settled=tally.settled,
    )


_DECISIONS = {
    VerdictState.UPHELD: "flag",
    VerdictState.REJECTED: "agree",
    VerdictState.INCONCLUSIVE: "inconclusive",
}


def _decision(client: CoordinatorClient, round: int, subject: str, tally: Verdict) -> str:
    """flag, agree or inconclusive: the settled outcome, or the one settling would give now."""
    if tally.state in _DECISIONS:
        return _DECISIONS[tally.state]
    if tally.flag_weight == 0:
        return "agree" if tally.agree_weight > 0 else "none"
    seal = client.seal(round)
    assert seal is not None, "a flag was revealed, so the round is sealed"
    outcome = settle_outcome(
        tally.flag_weight,
        tally.agree_weight,
        client.rules_at(round),
        seal.total_weight,
        client.weight_at(subject, round),
    )
    return _DECISIONS[outcome]


def _batch_audit(
    client: CoordinatorClient,
    round: int,
    commitment: RolloutsPublished,
    verdict: PeerVerdict,
    votes: dict[str, list[Vote]],
    board: dict[str, dict[str, Any]] | None,
    recomputed: _Recomputed,
) -> BatchAudit:
    own = _own_check(verdict, recomputed)
    committee = _committee(client, round, commitment.peer, votes.get(commitment.peer, []))
    problems = _chain_disagreements(own, committee)
    shown = None
    if board is not None:
        shown = board.get(commitment.peer)
        problems += _board_disagreements(own, committee, shown)
    return BatchAudit(
        subject=commitment.peer,
        digest="0x" + commitment.digest.hex(),
        own=own,
        committee=committee,
        leaderboard=_board_summary(shown) if board is not None else None,
        disagreements=tuple(problems),
    )


def _chain_disagreements(own: OwnCheck, committee: Committee) -> list[str]:
    outcome = outcome_text(committee.outcome, committee.flaggers > 0)
    if own.decision == "flag" and committee.decision == "agree":
        return [f"own check flags it ({_why(own)}), the committee accepted it (outcome {outcome})"]
    if own.decision == "flag" and committee.decision == "none":
        return [
            f"own check flags it ({_why(own)}), but no committee vote counted: it went unjudged"
        ]
    if own.decision == "agree" and committee.decision == "flag":
        return [
            f"own check finds every reward right, the committee's flags won (outcome {outcome})"
        ]
    if own.decision == "flag" and committee.decision == "inconclusive":
        return [
            (
                f"own check flags it ({_why(own)}), the committee's flags were too light to "
                "decide it: inconclusive (no slash, no verified reward)"
            )
        ]
    return []


def _board_disagreements(
    own: OwnCheck, committee: Committee, shown: dict[str, Any] | None
) -> list[str]:
    if shown is None:
        return ["the batch is not on the leaderboard"]
    problems = []
    chain_outcome = committee.outcome if committee.outcome in SETTLED else None
    if shown.get("outcome") != chain_outcome:
        flagged = committee.flaggers > 0
        problems.append(
            f"the leaderboard shows outcome {outcome_text(shown.get('outcome'), flagged)}, "
            f"the chain {outcome_text(chain_outcome, flagged)}"
        )
    weights = (str(committee.agree_weight), str(committee.flag_weight))
    if (shown.get("agree_weight_wei"), shown.get("flag_weight_wei")) != weights:
        problems.append(
            f"the leaderboard shows agree/flag weights {shown.get('agree_weight_wei')}/"
            f"{shown.get('flag_weight_wei')} wei, the chain {weights[0]}/{weights[1]}"
        )
    expected = own.verified_reward_milli / 1000
    agreed = own.decision == "agree" and committee.decision == "agree"
    if agreed and shown.get("verified_reward") is not None and shown["verified_reward"] != expected:
        problems.append(
            f"the leaderboard shows verified reward {shown['verified_reward']}, own check {expected}"
        )
    return problems


def _board_summary(shown: dict[str, Any] | None) -> dict[str, Any] | None:
    if shown is None:
        return None
    keys = (
        "outcome",
        "verified_reward",
        "agree_weight_wei",
        "flag_weight_wei",
        "verified",
        "pending",
    )
    return {key: shown.get(key) for key in keys}


def _leaderboard(settings: AuditSettings, round: int) -> dict[str, dict[str, Any]]:
    """The leaderboard's batches of ``round`` by peer (empty when it has none)."""
    assert settings.indexer_url is not None
    url = settings.indexer_url.rstrip("/") + f"/api/rounds/{round}"
    try:
        response = requests.get(url, timeout=settings.http_timeout)
    except requests.RequestException as exc:
        raise AuditError(
            f"the leaderboard at {settings.indexer_url} is unreachable: {exc}"
        ) from None
    if response.status_code == 404:
        return {}
    if response.status_code != 200:
        raise AuditError(
            f"the leaderboard at {url} answered HTTP {response.status_code}: {response.text[:200]}"
        )
    return {batch["peer"]: batch for batch in response.json().get("batches", [])}
