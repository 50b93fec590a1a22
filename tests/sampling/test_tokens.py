"""The sampled-token rule through the real verifier: every completion carries its token ids, at
most the preset's limit, and they are the verifier's tokenizer's sampling of its text.

The attack it stops: a batch whose texts no model under the limit could have written (a long
chain of thinking before the answer), with short ids. Each case below is flagged over everything
it committed with its own reason; a batch of a tokenizer the verifier does not have is skipped;
the honest batch, with the ids a sampler wrote, still passes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from node.chain.events import RolloutsPublished
from node.rollouts import Completion, Group, RejectReason, encode_batch, sign_batch
from node.rollouts.assemble import score_group
from node.sampling.verdicts import PeerVerdict
from node.sampling.verify import RoundContext, verify_batch
from node.tasks import get_preset
from tests.rollouts.factories import DOMAIN, PEER
from tests.sampling.batches import (
    BASES,
    assert_flagged,
    DEFAULT_PRESET_NAME,
    GROUP_SIZE,
    ROUND,
    TASKS_PER_ROUND,
    TOKENS,
    commitment_for,
    honest_batch,
    republished,
    round_seed,
    stopped,
    tasks_for,
)

CONTEXT = RoundContext(
    DOMAIN,
    ROUND,
    round_seed(ROUND),
    tasks_per_round=TASKS_PER_ROUND,
    group_size=GROUP_SIZE,
    tokens=TOKENS,
    bases=BASES,
)
HONEST = honest_batch(PEER, DOMAIN)
LIMIT = get_preset(DEFAULT_PRESET_NAME).max_completion_tokens
EOS = TOKENS.tokenizer.eos_token_id


def _first_completion_changed(change: Callable[[Completion], dict]) -> list[Group]:
    groups = list(HONEST.batch.body.groups)
    first = groups[0].completions[0]
    changed = first.model_copy(update=change(first))
    changed = changed.model_copy(update={"logprobs": [0.0] * len(changed.token_ids)})
    completions = [changed, *groups[0].completions[1:]]
    groups[0] = Group(task=groups[0].task, completions=completions)
    return groups


def _verdict(groups: list[Group]) -> tuple[PeerVerdict, RolloutsPublished]:
    data, commitment = republished(HONEST.batch, groups, PEER, DOMAIN)
    return verify_batch(data, commitment, CONTEXT), commitment


def test_the_honest_batch_carries_its_ids_and_passes() -> None:
    body = HONEST.batch.body
    assert body.model.tokenizer == TOKENS.digest
    assert all(c.token_ids for g in body.groups for c in g.completions)
    verdict, _ = _verdict(list(body.groups))
    assert verdict.accepted and verdict.verified_reward_milli == HONEST.reward_sum_milli


def test_a_long_answer_within_the_limit_passes_and_one_token_more_is_flagged() -> None:
    task = tasks_for(PEER.address)[0]
    answer = f" <answer>{task.answer}</answer>"
    answer_tokens = len(stopped([answer])[0].token_ids)  # its ids and the stop token
    fits = "a" + " so" * (LIMIT - answer_tokens - 1) + answer  # exactly LIMIT ids
    assert len(stopped([fits])[0].token_ids) == LIMIT
    groups = list(HONEST.batch.body.groups)
    groups[0] = score_group(task, stopped([fits] * GROUP_SIZE))
    verdict, _ = _verdict(groups)
    assert verdict.accepted, verdict.detail

    longer = "a so" + fits[1:]
    assert len(stopped([longer])[0].token_ids) == LIMIT + 1
    groups[0] = score_group(task, stopped([longer] * GROUP_SIZE))
    verdict, commitment = _verdict(groups)
    assert_flagged(verdict, commitment, "too_many_tokens")
    assert f"the preset allows {LIMIT}" in verdict.detail


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        pytest.param(
            lambda c: {"text": "thinking " * 800 + c.text},
            "token_mismatch",
            id="long text, short ids",
        ),
        pytest.param(
            lambda c: {"token_ids": c.token_ids[:-1]}, "token_mismatch", id="stop, no stop token"
        ),
        pytest.param(
            lambda c: {"finish_reason": "length"}, "token_mismatch", id="length, yet a stop token"
        ),
        pytest.param(
            lambda c: {"token_ids": [c.token_ids[0], EOS, *c.token_ids[1:]]},
            "token_mismatch",
            id="a stop inside",
        ),
        pytest.param(
            lambda c: {"token_ids": [len(TOKENS.tokenizer), *c.token_ids]},
            "token_mismatch",
            id="an id out of the vocabulary",
        ),
    ],
)
def test_ids_that_are_not_a_sampling_of_the_text_are_flagged(
    change: Callable[[Completion], dict], reason: str
) -> None:
    verdict, commitment = _verdict(_first_completion_changed(change))
    assert_flagged(verdict, commitment, reason)


def test_a_batch_of_another_tokenizer_is_skipped_not_judged() -> None:
    """The recompute encodes the prompt with the batch's tokenizer, so a verifier with another
    one cannot check the samples: it skips the batch (no flag, no credit), whatever its texts."""
    body = HONEST.batch.body
    model = body.model.model_copy(update={"tokenizer": "0x" + "ab" * 32})
    signed = sign_batch(body.model_copy(update={"model": model}), PEER, DOMAIN)
    data = encode_batch(signed)
    verdict = verify_batch(data, commitment_for(data, signed, peer=PEER.address), CONTEXT)
    assert verdict.reason is RejectReason.UNKNOWN_MODEL and verdict.item() is None
    assert "tokenizer" in verdict.detail and verdict.groups == ()
