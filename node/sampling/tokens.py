"""The sampled-token rule of a batch: every completion carries its token ids, at most the preset's
limit, and they are a sampling of its text that ends as its finish reason says.

Without ids a verifier cannot tell how long a completion was in tokens, so a batch could answer
with texts no honest model under the round's limit could have written. A verifier whose tokenizer
is the batch's (equal digests) decodes the ids and checks them against the text exactly. One with
another tokenizer cannot, so that models with different tokenizers still judge each other, it
holds the text to ``MAX_CHARS_PER_TOKEN`` characters per token of the limit instead
(docs/PROTOCOL.md, "Batch document").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from node.learning_data import FinishReason
from node.rollouts.limits import MAX_CHARS_PER_TOKEN
from node.rollouts.reasons import BatchRejected, RejectReason
from node.rollouts.schema import BatchBody, Completion


class TokenCheck(Protocol):
    """This node's tokenizer, as the verifier needs it (``node.policy.peer_ids.PeerIds``)."""

    @property
    def digest(self) -> str: ...

    def agrees(self, ids: Sequence[int], text: str, finish_reason: FinishReason) -> bool: ...


def check_tokens(body: BatchBody, limit: int, tokens: TokenCheck) -> None:
    """BatchRejected unless every completion has at most ``limit`` token ids (the stop token
    counts) that are its sampling: decoded by this tokenizer when it is the batch's, else
    bounded by the text's length."""
    named = body.model.tokenizer
    if named is None:
        raise BatchRejected(
            RejectReason.MISSING_TOKEN_IDS, "the batch names no tokenizer for its token ids"
        )
    completions = list(_completions(body))
    for where, completion in completions:
        if completion.token_ids is None:
            raise BatchRejected(RejectReason.MISSING_TOKEN_IDS, f"{where} has no token ids")
    same_tokenizer = named == tokens.digest
    for where, completion in completions:
        ids = completion.token_ids or []
        if len(ids) > limit:
            raise BatchRejected(
                RejectReason.TOO_MANY_TOKENS,
                f"{where} has {len(ids)} tokens; the preset allows {limit}",
            )
        if same_tokenizer:
            if not tokens.agrees(ids, completion.text, completion.finish_reason):
                raise BatchRejected(
                    RejectReason.TOKEN_MISMATCH,
                    f"{where}: its token ids are not a sampling of its text ending with "
                    f"{completion.finish_reason!r}",
                )
        elif len(completion.text) > limit * MAX_CHARS_PER_TOKEN:
            raise BatchRejected(
                RejectReason.TOO_MANY_TOKENS,
                f"{where} has {len(completion.text)} characters, more than {limit} tokens of "
                f"{MAX_CHARS_PER_TOKEN} characters each (its tokenizer is not this node's)",
            )


def _completions(body: BatchBody) -> Iterator[tuple[str, Completion]]:
    for group in body.groups:
        for position, completion in enumerate(group.completions):
            yield f"task {group.task.index}, completion {position}", completion
