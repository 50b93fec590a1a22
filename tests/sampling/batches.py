"""Honest and dishonest peer batches for the intake tests, built with the real producer path."""

from __future__ import annotations

from eth_account.signers.local import LocalAccount
from eth_utils import keccak

from node.chain.eip712 import Domain, sign_rollout_batch
from node.chain.events import RolloutsPublished
from node.learning_data import GeneratedCompletion
from node.policy.model import load_tokenizer
from node.policy.peer_ids import PeerIds, written_completion
from tests.rollouts.factories import BASE, model_info
from node.rollouts import (
    Group,
    RejectReason,
    SignedBatch,
    batch_digest,
    body_hash,
    encode_batch,
    sign_batch,
)
from node.rollouts.assemble import EncodedBatch, assemble_batch, score_group
from node.rollouts.canonical import canonical_json
from node.rollouts.limits import MAX_COMPLETIONS_PER_GROUP
from node.sampling.verdicts import PeerVerdict
from node.tasks import DEFAULT_PRESET_NAME, TaskItem, derive_tasks, get_preset

ROUND = 5
#: The verifier's tokenizer (the shipped one): it counts and decodes the batches' token ids.
TOKENS = PeerIds(load_tokenizer())
MODEL = model_info(TOKENS.digest, name="HuggingFaceTB/SmolLM2-135M-Instruct")
#: The base models the verifier here holds: the one MODEL names.
BASES = frozenset({BASE})
#: The round's rules of shape here: every task of the default preset (n), G completions each.
TASKS_PER_ROUND = get_preset(DEFAULT_PRESET_NAME).tasks_per_round
GROUP_SIZE = 4


def assert_flagged(verdict: PeerVerdict, commitment: RolloutsPublished, reason: str) -> None:
    """``verdict`` flags ``reason`` over everything ``commitment`` committed, keeping nothing."""
    assert verdict.reason is RejectReason(reason), verdict.detail
    item = verdict.item()
    assert item is not None and item.is_flag
    assert (item.checked, item.agreed, item.verified_reward_sum) == (commitment.completions, 0, 0)
    assert verdict.groups == ()


def round_seed(round: int) -> bytes:
    return keccak(b"test genesis seed" + round.to_bytes(8, "big"))


def tasks_for(peer: str, round: int = ROUND) -> list[TaskItem]:
    return derive_tasks(round_seed(round), peer, get_preset(DEFAULT_PRESET_NAME))


def mixed_texts(task: TaskItem, group_size: int = GROUP_SIZE) -> list[str]:
    """Half right, half wrong: every group has advantage."""
    right = f"Adding up. <answer>{task.answer}</answer>"
    wrong = "<answer>-12345</answer>"
    return [right if i % 2 == 0 else wrong for i in range(group_size)]


def stopped(texts: list[str]) -> list[GeneratedCompletion]:
    """Completions that wrote ``texts`` and then a stop token (their ids, log-probs unknown)."""
    return [written_completion(TOKENS.tokenizer, text) for text in texts]


def _one_token(text: str) -> GeneratedCompletion:
    """A completion that claims to be one token (all its ids would take the batch past the
    4 MiB a verifier reads)."""
    return GeneratedCompletion(text, (TOKENS.tokenizer.eos_token_id,), "stop", (0.0,))


def honest_batch(
    account: LocalAccount, domain: Domain, round: int = ROUND, *, group_size: int = GROUP_SIZE
) -> EncodedBatch:
    """Every task of the round, ``group_size`` completions each, half of them right."""
    tasks = tasks_for(account.address, round)
    return assemble_batch(
        account=account,
        domain=domain,
        round=round,
        preset=DEFAULT_PRESET_NAME,
        model=MODEL,
        tasks=tasks,
        samples=[stopped(mixed_texts(task, group_size)) for task in tasks],
    )


def commitment_for(
    data: bytes, batch: SignedBatch | None, *, peer: str, round: int = ROUND, **overrides: int
) -> RolloutsPublished:
    """The RolloutsPublished event a chain would hold for ``data`` (counts from ``batch``)."""
    body = batch.body if batch is not None else None
    values = {
        "groups": len(body.groups) if body else 1,
        "completions": body.completion_count if body else 1,
        "reward_sum": body.reward_sum_milli if body else 0,
    }
    values.update(overrides)
    return RolloutsPublished(
        block_number=1,
        block_hash="0x" + "11" * 32,
        tx_hash="0x" + "22" * 32,
        log_index=0,
        round=round,
        peer=peer,
        digest=batch_digest(data),
        relayer=None,
        **values,
    )


def resign(batch: SignedBatch, signer: LocalAccount, domain: Domain) -> bytes:
    """``batch``'s body with a signature by ``signer`` (who is not necessarily body.peer)."""
    signature = sign_rollout_batch(
        signer, domain, round=batch.body.round, body_hash=body_hash(batch.body)
    )
    return encode_batch(batch.model_copy(update={"signature": "0x" + signature.hex()}))


def with_groups(batch: SignedBatch, groups: list, account: LocalAccount, domain: Domain) -> bytes:
    """A re-signed batch whose groups were replaced (a peer lying about its own content)."""
    body = batch.body.model_copy(update={"groups": groups})
    return encode_batch(sign_batch(body, account, domain))


def republished(
    batch: SignedBatch, groups: list[Group], account: LocalAccount, domain: Domain
) -> tuple[bytes, RolloutsPublished]:
    """``batch`` with ``groups`` instead, re-signed, and committed on-chain with its own counts:
    a peer whose bytes and commitment agree, so only the checks after the commitment judge it."""
    signed = sign_batch(batch.body.model_copy(update={"groups": groups}), account, domain)
    data = encode_batch(signed)
    return data, commitment_for(data, signed, peer=account.address, round=signed.body.round)


def oversized_batch(
    account: LocalAccount, domain: Domain, round: int = ROUND
) -> tuple[SignedBatch, bytes]:
    """A signed batch valid in every way but its size: every task answered right 32 times after
    8,000 characters of thinking, about 2 MiB of canonical JSON (the limit is 1 MiB). encode_batch
    refuses to write it, so this peer writes the canonical JSON itself."""
    tasks = tasks_for(account.address, round)
    text = "x" * 8000 + " <answer>{}</answer>"
    groups = [
        score_group(task, [_one_token(text.format(task.answer))] * MAX_COMPLETIONS_PER_GROUP)
        for task in tasks
    ]
    honest = honest_batch(account, domain, round).batch
    body = honest.body.model_copy(update={"groups": groups})
    batch = sign_batch(body, account, domain)
    return batch, canonical_json(batch)
