"""A receiver's provenance check of the peer groups it is about to train on.

Every group a node trains on from a peer is recomputed first (docs/PROTOCOL.md, "Seeded
sampler"): the peer's adapter is fetched by the address its batch names, loaded into a scratch
adapter over this node's base model, and the group's completions are teacher-forced with their
public seeds. The node then trains only on the completions that passed:

- a completion below the soft tolerance is dropped (no float drift explains it);
- a batch with a completion below the hard tolerance is not trained on at all;
- a completion that passed is trained on with the log-probs the recompute gave its tokens where
  the batch claims others (the importance weights of ``training.peer_importance`` then rest on
  the sampler's probabilities, not on the sender's word);
- a batch whose adapter cannot be fetched (``adapter_missing``) or is not an adapter of the shape
  it names (``adapter_mismatch``), or names the adapter another publisher named in that round or
  the one before (``adapter_mismatch``: a copied adapter), is not trained on either.

J groups a round cost J recomputes (about a second each for G = 8 on two cores) and the fetch of
at most J adapters. Nothing here raises for a peer's data: every outcome is a
:class:`BatchProvenance`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from transformers import PreTrainedTokenizerBase

from node.policy.adapters import AdapterPool
from node.policy.model import encode_prompts
from node.provenance.adapter import AdapterFormatError
from node.provenance.check import ProvenanceResult, judge
from node.provenance.model_info import lora_settings
from node.provenance.publish import fetch_adapter
from node.provenance.recompute import CompletionMargins, GroupToCheck, batch_margins
from node.provenance.seeds import completion_seed
from node.rollouts.assemble import round_logprob
from node.rollouts.reasons import RejectReason
from node.rollouts.schema import Completion, ModelInfo
from node.sampling.verdicts import VerifiedGroup
from node.storage import ContentStore
from node.storage.errors import BadManifest, StoreError
from node.tasks import build_messages

log = logging.getLogger(__name__)


#: A claimed log-prob further than this (nats) from the recomputed one is not the sampler's:
#: honest ones differ by float drift and the batch's 6-decimal rounding (~1e-5 at most).
LOGPROB_TOLERANCE = 1e-3


@dataclass(frozen=True)
class BatchProvenance:
    """What the recompute of one batch's groups found. ``reason`` is None when it was checked
    and not flagged (``result`` then says which completions are excluded, and ``logprobs``
    holds each recomputed completion's log-probs, by (task index, completion))."""

    peer: str
    round: int
    reason: RejectReason | None
    detail: str = ""
    result: ProvenanceResult | None = None
    logprobs: Mapping[tuple[int, int], tuple[float, ...]] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """Whether any of the batch's groups may be trained on."""
        return self.reason is None and self.result is not None and not self.result.flagged

    def passed(self, group: VerifiedGroup) -> VerifiedGroup | None:
        """``group`` without its excluded completions, each with the log-probs its sampler gave
        (the recomputed ones where the batch's claim is off by more than ``LOGPROB_TOLERANCE``:
        importance weights built on a claim would trust the sender); None when nothing usable
        is left (the batch failed, or fewer than two completions or no reward signal remain)."""
        if not self.usable or self.result is None:
            return None
        index = group.task.index
        keep = [
            i for i in range(len(group.completions)) if (index, i) not in self.result.excluded
        ]
        completions = tuple(self._sampled(group.completions[i], (index, i)) for i in keep)
        if completions == tuple(group.completions):
            return group
        trimmed = VerifiedGroup(
            group.peer,
            group.round,
            group.task,
            completions,
            tuple(group.rewards[i] for i in keep),
            group.model,
        )
        return trimmed if len(keep) >= 2 and trimmed.has_advantage else None

    def _sampled(self, completion: Completion, key: tuple[int, int]) -> Completion:
        recomputed = self.logprobs.get(key)
        if recomputed is None or len(recomputed) != len(completion.logprobs):
            return completion
        claimed = completion.logprobs
        if all(abs(c - r) <= LOGPROB_TOLERANCE for c, r in zip(claimed, recomputed, strict=True)):
            return completion
        return completion.model_copy(update={"logprobs": [round_logprob(r) for r in recomputed]})


@dataclass(frozen=True)
class NamedAdapter:
    """The adapter one batch names, and where the chain put the batch: (block, log index), or
    None where the caller does not know (a receiver's groups)."""

    round: int
    peer: str
    adapter: str
    position: tuple[int, int] | None = None


def copied_adapters(groups: Sequence[VerifiedGroup]) -> set[tuple[int, str]]:
    """The (round, peer) batches among ``groups``' whose adapter another publisher named in the
    same round or the one before (:func:`copies`, chain order unknown)."""
    return copies(
        NamedAdapter(g.round, g.peer, g.model.adapter) for g in groups if g.model is not None
    )


def copies(named: Iterable[NamedAdapter]) -> set[tuple[int, str]]:
    """The (round, peer) batches of ``named`` that copied another publisher's adapter: one named
    by another publisher's batch of the round before, or of the same round and earlier on the
    chain. Of two batches of one round whose chain order is unknown, both count (a receiver
    cannot tell which one copied, and trains on neither); where it is known, only the later one
    does, so a copier cannot get its victim flagged."""
    by_adapter: dict[str, dict[tuple[int, str], tuple[int, int] | None]] = {}
    for n in named:
        by_adapter.setdefault(n.adapter, {})[(n.round, n.peer)] = n.position
    copied = set()
    for batches in by_adapter.values():
        for (round, peer), position in batches.items():
            if any(
                p != peer and (r == round - 1 or (r == round and _earlier(at, position)))
                for (r, p), at in batches.items()
            ):
                copied.add((round, peer))
    return copied


def _earlier(first: tuple[int, int] | None, second: tuple[int, int] | None) -> bool:
    """Whether ``first`` may precede ``second`` on the chain (True when either is unknown)."""
    return first is None or second is None or first < second


class KeptMargins:
    """The margins recomputed over one base model, kept for the rounds their batches can still
    be judged: a seat's check of a batch reuses those of the groups its node recomputed before
    training on them, and the other way round. Keyed by everything else that decides them: the
    adapter's store address (its bytes) and shape, the prompt, the completions and their seeds;
    so a kept answer is the one a recompute would give."""

    def __init__(self) -> None:
        self._kept: dict[int, dict[tuple, list[CompletionMargins]]] = {}

    def get(self, round: int, key: tuple) -> list[CompletionMargins] | None:
        return self._kept.get(round, {}).get(key)

    def put(self, round: int, key: tuple, margins: list[CompletionMargins]) -> None:
        self._kept.setdefault(round, {})[key] = margins

    def forget_before(self, round: int) -> None:
        """Drops the margins of batches of rounds before ``round``."""
        for old in [r for r in list(self._kept) if r < round]:
            self._kept.pop(old, None)


_KEPT: WeakKeyDictionary[AdapterPool, KeptMargins] = WeakKeyDictionary()


def kept_margins(pool: AdapterPool) -> KeptMargins:
    """The margins kept for ``pool``'s base model: shared by the nodes of one process over one
    pool (the experiment, the local swarm), since margins depend on the base, not the node."""
    kept = _KEPT.get(pool)
    if kept is None:
        kept = _KEPT[pool] = KeptMargins()
    return kept


@dataclass(frozen=True)
class Recomputer:
    """What a receiver recomputes with: its pool over the base model, its tokenizer (which
    encodes the prompts as the sampler did) and the store the adapters come from."""

    pool: AdapterPool
    tokenizer: PreTrainedTokenizerBase
    store: ContentStore
    kept: KeptMargins | None = None

    def check_batch(self, groups: Sequence[VerifiedGroup], round_seed: bytes) -> BatchProvenance:
        """Recomputes ``groups`` (all of one batch) under the adapter their batch names; never
        raises for a peer's data (a bug here is a ``verifier_error``, not the peer's fault)."""
        try:
            return self._recompute(groups, round_seed)
        except Exception as exc:
            first = groups[0]
            log.exception("provenance check of %s's round %d failed", first.peer, first.round)
            return BatchProvenance(
                first.peer, first.round, RejectReason.VERIFIER_ERROR, repr(exc)[:200]
            )

    def check_chosen(
        self,
        groups: Sequence[VerifiedGroup],
        round_seed: bytes,
        *,
        named: Iterable[NamedAdapter] = (),
    ) -> BatchProvenance:
        """A committee seat's check of ``groups`` (some groups of one batch): refused as a copy
        when an earlier batch among ``named`` (which includes this one) names its adapter, else
        recomputed."""
        first = groups[0]
        return self._outcome(groups, copies(named), {first.round: round_seed})

    def check_peer_groups(
        self,
        groups: Sequence[VerifiedGroup],
        round_seeds: Mapping[int, bytes],
        *,
        others: Sequence[VerifiedGroup] = (),
    ) -> dict[tuple[int, str], BatchProvenance]:
        """Each batch of ``groups`` checked (by (round, peer)); ``others``: the groups of every
        batch this node verified, whose adapters a copy is looked for among."""
        copied = copied_adapters([*groups, *others])
        return {
            key: self._outcome(batch, copied, round_seeds)
            for key, batch in _by_batch(groups).items()
        }

    def passing(
        self,
        candidates: Sequence[VerifiedGroup],
        wanted: int,
        round_seeds: Mapping[int, bytes],
        *,
        others: Sequence[VerifiedGroup] = (),
        budget: float = math.inf,
    ) -> tuple[list[VerifiedGroup], list[BatchProvenance]]:
        """Up to ``wanted`` of ``candidates``, in their order, each recomputed (once per batch)
        and trimmed to the completions that passed; and every batch's outcome, in the order
        checked. No batch is begun after ``budget`` seconds: peers whose adapters hang cost a
        round's training at most the budget and one store timeout; those left unchecked are
        not trained on."""
        copied = copied_adapters([*candidates, *others])
        batches = _by_batch(candidates)
        kept: list[VerifiedGroup] = []
        outcomes: dict[tuple[int, str], BatchProvenance] = {}
        started = time.monotonic()
        for group in candidates:
            if len(kept) == wanted:
                break
            key = (group.round, group.peer)
            if key not in outcomes:
                if time.monotonic() - started > budget:
                    break
                outcomes[key] = self._outcome(batches[key], copied, round_seeds)
            passed = outcomes[key].passed(group)
            if passed is not None:
                kept.append(passed)
        return kept, list(outcomes.values())

    def _outcome(
        self,
        batch: Sequence[VerifiedGroup],
        copied: set[tuple[int, str]],
        round_seeds: Mapping[int, bytes],
    ) -> BatchProvenance:
        """One batch's outcome: refused as a copy, else recomputed."""
        round, peer = batch[0].round, batch[0].peer
        if (round, peer) in copied:
            detail = "another publisher named its adapter"
            return BatchProvenance(peer, round, RejectReason.ADAPTER_MISMATCH, detail)
        return self.check_batch(batch, round_seeds[round])

    def _recompute(self, groups: Sequence[VerifiedGroup], round_seed: bytes) -> BatchProvenance:
        first = groups[0]
        peer, round, model = first.peer, first.round, first.model
        if model is None:
            raise ValueError("groups without their batch's model record cannot be recomputed")
        to_check = {g.task.index: _to_check(g, self.tokenizer, round_seed) for g in groups}
        shape = (model.lora.rank, model.lora.alpha, tuple(model.lora.targets))
        keys = {i: (model.adapter, shape, _fingerprint(c)) for i, c in to_check.items()}
        kept = self.kept or KeptMargins()
        margins = {i: kept.get(round, keys[i]) for i in to_check}
        missing = [i for i, m in margins.items() if m is None]
        if missing:
            fresh = self._margins_under(model, [to_check[i] for i in missing])
            if isinstance(fresh, tuple):
                return BatchProvenance(peer, round, *fresh)
            for i, found in zip(missing, fresh, strict=True):
                margins[i] = found
                kept.put(round, keys[i], found)
        result = judge(margins)  # type: ignore[arg-type]
        if result.flagged:
            detail = f"not sampled from its adapter: {result.evidence}"
            return BatchProvenance(peer, round, RejectReason.PROVENANCE, detail, result)
        logprobs = {
            (i, c): m.logprobs
            for i, group in margins.items()
            for c, m in enumerate(group or ())
            if m.logprobs
        }
        return BatchProvenance(peer, round, None, result=result, logprobs=logprobs)

    def _margins_under(
        self, model: ModelInfo, groups: list[GroupToCheck]
    ) -> list[list[CompletionMargins]] | tuple[RejectReason, str]:
        """``groups``' margins under the adapter ``model`` names, fetched from the store; or why
        they cannot be had."""
        try:
            state = fetch_adapter(self.store, bytes.fromhex(model.adapter[2:]))
        except (BadManifest, AdapterFormatError) as exc:
            return RejectReason.ADAPTER_MISMATCH, str(exc)[:200]
        except StoreError as exc:
            return RejectReason.ADAPTER_MISSING, str(exc)[:200]
        try:
            with self.pool.borrowed(lora_settings(model.lora), state) as policy:
                return batch_margins(policy, groups, pad_id=_pad_id(self.tokenizer))
        except ValueError as exc:  # the weights or the shape do not fit this base
            return RejectReason.ADAPTER_MISMATCH, str(exc)[:200]


def _by_batch(groups: Sequence[VerifiedGroup]) -> dict[tuple[int, str], list[VerifiedGroup]]:
    """``groups`` by the batch, (round, peer), they come from, in their order."""
    batches: dict[tuple[int, str], list[VerifiedGroup]] = {}
    for group in groups:
        batches.setdefault((group.round, group.peer), []).append(group)
    return batches


def _to_check(
    group: VerifiedGroup, tokenizer: PreTrainedTokenizerBase, round_seed: bytes
) -> GroupToCheck:
    (prompt,) = encode_prompts(tokenizer, [build_messages(group.task)])
    seeds = [
        completion_seed(round_seed, group.peer, group.task.index, g)
        for g in range(len(group.completions))
    ]
    return GroupToCheck(prompt, [c.token_ids for c in group.completions], seeds)


def _fingerprint(group: GroupToCheck) -> tuple:
    """What of a group decides its margins under a given adapter, hashable."""
    return (tuple(group.prompt_ids), tuple(map(tuple, group.completions)), tuple(group.seeds))


def _pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    pad = tokenizer.pad_token_id
    return int(pad) if pad is not None else 0
