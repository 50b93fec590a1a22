"""Peer intake end to end on a real LocalStore: honest batches pass, each attack gets its reason."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.policy.peer_ids import written_completion
from node.rollouts import Group, RejectReason, TaskRecord, encode_batch, sign_batch
from node.rollouts.limits import MAX_BATCH_BYTES, MAX_FETCH_BYTES
from node.sampling.fetch import fetch_batches
from node.sampling.intake import intake_round
from node.sampling.verify import RoundContext, verify_batch
from node.storage import ContentStore, KuboStore, LocalStore
from tests.rollouts.factories import COORDINATOR, DOMAIN, OTHER, PEER
from tests.sampling.batches import (
    BASES,
    GROUP_SIZE,
    ROUND,
    TASKS_PER_ROUND,
    TOKENS,
    commitment_for,
    honest_batch,
    oversized_batch,
    republished,
    resign,
    round_seed,
    tasks_for,
    with_groups,
)
from tests.storage.fake_kubo import raw_cid, running_fake_kubo

CONTEXT = RoundContext(
    domain=DOMAIN,
    round=ROUND,
    round_seed=round_seed(ROUND),
    tasks_per_round=TASKS_PER_ROUND,
    group_size=GROUP_SIZE,
    tokens=TOKENS,
    bases=BASES,
)


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def test_honest_batch_is_accepted_and_agreed(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    store.put(encoded.data)
    commitment = commitment_for(encoded.data, encoded.batch, peer=PEER.address)

    report = intake_round([commitment], store, CONTEXT)

    (verdict,) = report.verdicts
    assert verdict.accepted and verdict.reason is None
    assert verdict.checked == verdict.agreed == encoded.completions
    assert verdict.verified_reward_milli == encoded.reward_sum_milli > 0
    assert len(verdict.groups) == encoded.groups
    assert all(group.has_advantage for group in verdict.groups)
    (item,) = report.items()
    assert not item.is_flag and report.verdicts[0].digest == encoded.digest
    assert not report.rejections


def test_own_commitment_is_skipped(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    store.put(encoded.data)
    commitment = commitment_for(encoded.data, encoded.batch, peer=PEER.address)
    report = intake_round([commitment], store, CONTEXT, own_address=PEER.address)
    assert report.verdicts == []


def _verdict_for(data: bytes, commitment, store: LocalStore):
    store.put(data)
    (verdict,) = intake_round([commitment], store, CONTEXT).verdicts
    return verdict


def test_forged_signature_is_flagged(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    forged = resign(encoded.batch, OTHER, DOMAIN)
    verdict = _verdict_for(forged, commitment_for(forged, encoded.batch, peer=PEER.address), store)
    assert verdict.reason is RejectReason.BAD_SIGNATURE
    assert verdict.item().is_flag and verdict.groups == ()


def test_batch_replayed_from_an_earlier_round_is_flagged(store: LocalStore) -> None:
    old = honest_batch(PEER, DOMAIN, round=ROUND - 1)
    commitment = commitment_for(old.data, old.batch, peer=PEER.address, round=ROUND)
    verdict = _verdict_for(old.data, commitment, store)
    assert verdict.reason is RejectReason.WRONG_ROUND
    assert verdict.item().is_flag


def test_batch_of_another_peer_republished_is_rejected(store: LocalStore) -> None:
    theirs = honest_batch(PEER, DOMAIN)
    commitment = commitment_for(theirs.data, theirs.batch, peer=OTHER.address)
    verdict = _verdict_for(theirs.data, commitment, store)
    assert verdict.reason is RejectReason.BAD_SIGNATURE  # signed by PEER, published by OTHER


def test_questions_swapped_for_easy_ones_are_flagged(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    easy = [
        Group(
            task=TaskRecord(
                dataset=g.task.dataset, index=g.task.index, question="What is 1 + 1?", answer="2"
            ),
            completions=[
                g.completions[0].model_copy(update={"text": "<answer>2</answer>", "reward": 1.0})
            ]
            * len(g.completions),
        )
        for g in encoded.batch.body.groups
    ]
    data = with_groups(encoded.batch, easy, PEER, DOMAIN)
    commitment = commitment_for(
        data,
        None,
        peer=PEER.address,
        groups=len(easy),
        completions=encoded.completions,
        reward_sum=1000 * encoded.completions,
    )
    verdict = _verdict_for(data, commitment, store)
    assert verdict.reason is RejectReason.TASK_MISMATCH
    assert verdict.checked == encoded.completions and verdict.agreed == 0


def test_inflated_rewards_are_counted_per_completion(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    groups = list(encoded.batch.body.groups)
    first = groups[0]
    inflated = [c.model_copy(update={"reward": 1.0}) for c in first.completions]
    groups[0] = Group(task=first.task, completions=inflated)
    data = with_groups(encoded.batch, groups, PEER, DOMAIN)
    wrong_claims = sum(1 for c in first.completions if c.reward < 1.0)
    commitment = commitment_for(
        data,
        None,
        peer=PEER.address,
        groups=len(groups),
        completions=encoded.completions,
        reward_sum=encoded.reward_sum_milli + 1000 * wrong_claims,
    )
    verdict = _verdict_for(data, commitment, store)
    assert verdict.reason is RejectReason.REWARD_MISMATCH
    assert verdict.checked == encoded.completions
    assert verdict.agreed == encoded.completions - wrong_claims > 0
    assert verdict.verified_reward_milli == encoded.reward_sum_milli  # our scores, not the claims
    assert len(verdict.groups) == encoded.groups - 1  # only the inflated group is dropped
    assert verdict.item().is_flag


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda c: {"finish_reason": "length"}, id="cut, yet claimed 1"),
        pytest.param(lambda c: {"text": c.text + "</answer></answer>"}, id="junk tail"),
        pytest.param(lambda c: {"text": c.text + " " + c.text}, id="answered twice"),
    ],
)
def test_a_strict_batch_pays_only_clean_stops(store: LocalStore, forge) -> None:  # type: ignore[no-untyped-def]
    """Under smol-strict a right answer claimed 1.0 is re-scored with the batch's finish reason:
    cut, followed by junk, or repeated, it earns 0 and the claim is flagged."""
    encoded = honest_batch(PEER, DOMAIN)
    assert encoded.batch.body.tasks.preset == "smol-strict"
    groups = list(encoded.batch.body.groups)
    first = groups[0]
    right = next(i for i, c in enumerate(first.completions) if c.reward == 1.0)
    completions = list(first.completions)
    forged = completions[right].model_copy(update=forge(completions[right]))
    written = written_completion(TOKENS.tokenizer, forged.text, forged.finish_reason)
    ids = {"token_ids": list(written.token_ids), "logprobs": list(written.logprobs)}
    completions[right] = forged.model_copy(update=ids)
    groups[0] = Group(task=first.task, completions=completions)
    data, commitment = republished(encoded.batch, groups, PEER, DOMAIN)
    verdict = _verdict_for(data, commitment, store)
    assert verdict.reason is RejectReason.REWARD_MISMATCH
    assert verdict.agreed == encoded.completions - 1
    assert verdict.verified_reward_milli == encoded.reward_sum_milli - 1000


def test_commitment_that_disagrees_with_the_batch_is_flagged(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    commitment = commitment_for(
        encoded.data, encoded.batch, peer=PEER.address, reward_sum=encoded.reward_sum_milli + 500
    )
    verdict = _verdict_for(encoded.data, commitment, store)
    assert verdict.reason is RejectReason.COMMITMENT_MISMATCH


def test_groups_of_unequal_sizes_are_flagged(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    document = json.loads(encoded.data)
    document["body"]["groups"][0]["completions"].pop()
    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    verdict = _verdict_for(data, commitment_for(data, encoded.batch, peer=PEER.address), store)
    assert verdict.reason is RejectReason.GROUP_SIZE
    assert verdict.item().is_flag  # the peer committed to this document


def test_unknown_preset_is_rejected_with_reason(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    body = encoded.batch.body
    tasks = body.tasks.model_copy(update={"preset": "made-up"})
    data = encode_batch(sign_batch(body.model_copy(update={"tasks": tasks}), PEER, DOMAIN))
    verdict = _verdict_for(data, commitment_for(data, encoded.batch, peer=PEER.address), store)
    assert verdict.reason is RejectReason.UNKNOWN_PRESET
    assert "made-up" in verdict.detail
    assert verdict.item() is None  # maybe newer than this node: skipped, not flagged


@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param({"base": "0x" + "0f" * 32}, "base model", id="a base this node lacks"),
        pytest.param({"sampler": "swarm.sample/2"}, "sampler", id="another sampler"),
    ],
)
def test_a_model_this_node_cannot_recompute_is_skipped(
    store: LocalStore, change: dict, named: str
) -> None:
    """Not provably wrong (a model or sampler this node does not have), so not flagged; and a
    skipped batch earns nothing, so naming one nobody has buys a forger nothing either."""
    encoded = honest_batch(PEER, DOMAIN)
    body = encoded.batch.body
    model = body.model.model_copy(update=change)
    data = encode_batch(sign_batch(body.model_copy(update={"model": model}), PEER, DOMAIN))
    verdict = _verdict_for(data, commitment_for(data, encoded.batch, peer=PEER.address), store)
    assert verdict.reason is RejectReason.UNKNOWN_MODEL and named in verdict.detail
    assert verdict.item() is None and verdict.groups == ()


def test_garbage_behind_a_commitment_is_flagged_not_raised(store: LocalStore) -> None:
    data = b"\x00\xffnot json at all"
    verdict = _verdict_for(data, commitment_for(data, None, peer=PEER.address), store)
    assert verdict.reason is RejectReason.BAD_JSON and verdict.item().is_flag


def test_bytes_that_do_not_match_the_digest_are_not_voted_on() -> None:
    encoded = honest_batch(PEER, DOMAIN)
    commitment = commitment_for(encoded.data, encoded.batch, peer=PEER.address)
    verdict = verify_batch(encoded.data + b" ", commitment, CONTEXT)
    assert verdict.reason is RejectReason.DIGEST_MISMATCH
    assert verdict.item() is None  # the store lied, not provably the peer


def test_corrupted_blob_in_the_store_is_a_digest_mismatch(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    store.put(encoded.data)
    (blob,) = [p for p in (store.root).rglob(encoded.digest.hex()) if p.is_file()]
    blob.write_bytes(encoded.data.replace(b"answer", b"ANSWER", 1))
    commitment = commitment_for(encoded.data, encoded.batch, peer=PEER.address)
    (verdict,) = intake_round([commitment], store, CONTEXT).verdicts
    assert verdict.reason is RejectReason.DIGEST_MISMATCH and verdict.item() is None


def test_missing_batch_is_a_fetch_failure(store: LocalStore) -> None:
    encoded = honest_batch(PEER, DOMAIN)
    commitment = commitment_for(encoded.data, encoded.batch, peer=PEER.address)
    (verdict,) = intake_round([commitment], store, CONTEXT).verdicts
    assert verdict.reason is RejectReason.FETCH_FAILED and verdict.item() is None


@contextmanager
def holding(kind: str, tmp_path: Path, data: bytes) -> Iterator[ContentStore]:
    """A verifier's store (default 1 MiB cap) that holds ``data``, put there the way a dishonest
    peer would: a LocalStore opened with a larger cap, or a Kubo daemon with big blocks allowed."""
    if kind == "local":
        LocalStore(tmp_path / "store", max_blob_size=len(data)).put(data)
        yield LocalStore(tmp_path / "store")
        return
    with running_fake_kubo() as kubo:
        kubo.blocks[raw_cid(data)] = data
        yield KuboStore(kubo.url, timeout=30)


@pytest.mark.parametrize("kind", ["local", "kubo"])
def test_a_committed_batch_over_the_size_limit_is_flagged_too_large(kind, tmp_path) -> None:
    batch, data = oversized_batch(PEER, DOMAIN)
    assert MAX_BATCH_BYTES < len(data) <= MAX_FETCH_BYTES
    commitment = commitment_for(data, batch, peer=PEER.address)
    with holding(kind, tmp_path, data) as store:
        (verdict,) = intake_round([commitment], store, CONTEXT).verdicts
    assert verdict.reason is RejectReason.TOO_LARGE and verdict.groups == ()
    item = verdict.item()
    assert item is not None and item.is_flag
    assert (item.checked, item.agreed) == (batch.body.completion_count, 0)
    assert verdict.digest == hashlib.sha256(data).digest()


@pytest.mark.parametrize("kind", ["local", "kubo"])
def test_a_blob_over_the_fetch_ceiling_proves_nothing(kind, tmp_path) -> None:
    data = b"x" * (MAX_FETCH_BYTES + 1)
    commitment = commitment_for(data, None, peer=PEER.address, completions=8)
    with holding(kind, tmp_path, data) as store:
        (verdict,) = intake_round([commitment], store, CONTEXT).verdicts
    assert verdict.reason is RejectReason.FETCH_FAILED and verdict.item() is None
    assert str(MAX_FETCH_BYTES) in verdict.detail


def test_oversized_bytes_that_miss_the_digest_prove_nothing(tmp_path) -> None:
    batch, data = oversized_batch(PEER, DOMAIN)
    commitment = commitment_for(data, batch, peer=PEER.address)
    with holding("local", tmp_path, data) as store:
        assert isinstance(store, LocalStore)
        store.path_of(commitment.digest).write_bytes(data.replace(b"x", b"y", 1))
        (verdict,) = intake_round([commitment], store, CONTEXT).verdicts
    assert verdict.reason is RejectReason.DIGEST_MISMATCH and verdict.item() is None


def test_peer_that_hangs_is_abandoned_at_the_per_fetch_limit() -> None:
    slow = honest_batch(OTHER, DOMAIN)
    with running_fake_kubo() as kubo:
        kubo_store = KuboStore(kubo.url, timeout=30)
        kubo_store.put(slow.data)
        kubo.mode = "hang"
        results = fetch_batches(
            [commitment_for(slow.data, slow.batch, peer=OTHER.address)],
            kubo_store,
            per_fetch_timeout=0.5,
            total_budget=5,
        )
        kubo.release.set()
    (result,) = results
    assert result.reason is RejectReason.FETCH_TIMEOUT and result.data is None
    assert "per fetch" in result.detail  # abandoned at the per-fetch limit, not at the budget


def test_total_budget_bounds_the_round() -> None:
    with running_fake_kubo() as kubo:
        kubo_store = KuboStore(kubo.url, timeout=30)
        encoded = honest_batch(PEER, DOMAIN)
        kubo_store.put(encoded.data)
        kubo.mode = "hang"
        commitments = [commitment_for(encoded.data, encoded.batch, peer=PEER.address)] * 3
        results = fetch_batches(commitments, kubo_store, per_fetch_timeout=60, total_budget=0.5)
        kubo.release.set()
    assert [r.reason for r in results] == [RejectReason.FETCH_TIMEOUT] * 3
    assert all("budget" in r.detail for r in results)


def test_malformed_peer_does_not_disturb_honest_ones(store: LocalStore) -> None:
    good = honest_batch(PEER, DOMAIN)
    store.put(good.data)
    garbage = b'{"body": 1, "signature": "0x"}'
    store.put(garbage)
    report = intake_round(
        [
            commitment_for(garbage, None, peer=OTHER.address),
            commitment_for(good.data, good.batch, peer=PEER.address),
        ],
        store,
        CONTEXT,
    )
    by_peer = {v.peer: v for v in report.verdicts}
    assert by_peer[PEER.address].accepted and by_peer[PEER.address].groups
    assert by_peer[OTHER.address].reason is RejectReason.BAD_SCHEMA
    assert report.rejections == {"bad_schema": 1}
    assert [a.subject for a in report.items()] == sorted(
        [PEER.address, OTHER.address], key=lambda a: int(a, 16)
    )


def test_tasks_come_from_the_round_seed_and_the_peer() -> None:
    assert tasks_for(PEER.address) == tasks_for(PEER.address)
    assert tasks_for(PEER.address) != tasks_for(OTHER.address)
    assert tasks_for(PEER.address) != tasks_for(PEER.address, ROUND + 1)
    assert CONTEXT.domain.verifying_contract == COORDINATOR


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=4096))
def test_any_committed_bytes_end_in_a_verdict(data: bytes) -> None:
    commitment = commitment_for(data, None, peer=PEER.address)
    verdict = verify_batch(data, commitment, CONTEXT)
    assert verdict.reason is not None
    assert hashlib.sha256(data).digest() == verdict.digest
