"""The sampled-token rule of a batch: every completion's token ids (the schema requires them) are
at most the preset's limit, and they are a sampling of its text that ends as its finish reason
says.

Without ids a verifier could not tell how long a completion was in tokens, so a batch could answer
with texts no honest model under the round's limit could have written. The verifier's tokenizer is
the batch's (a batch of another tokenizer is not judged: ``unknown_model``), so it decodes the ids
and checks them against the text exactly (docs/PROTOCOL.md, "Batch document").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from node.learning_data import FinishReason
from node.rollouts.reasons import BatchRejected, RejectReason
from node.rollouts.schema import BatchBody, Completion


class TokenCheck(Protocol):
    """This node's tokenizer, as the verifier needs it (``node.policy.peer_ids.PeerIds``)."""

    @property
    def digest(self) -> str: ...

    def agrees(self, ids: Sequence[int], text: str, finish_reason: FinishReason) -> bool: ...


def check_tokens(body: BatchBody, limit: int, tokens: TokenCheck) -> None:
    """BatchRejected unless every completion has at most ``limit`` token ids (the stop token
    counts) that ``tokens``, the batch's tokenizer, decodes to its text."""
    for where, completion in _completions(body):
        ids = completion.token_ids
        if len(ids) > limit:
            raise BatchRejected(
                RejectReason.TOO_MANY_TOKENS,
                f"{where} has {len(ids)} tokens; the preset allows {limit}",
            )
        if not tokens.agrees(ids, completion.text, completion.finish_reason):
            raise BatchRejected(
                RejectReason.TOKEN_MISMATCH,
                f"{where}: its token ids are not a sampling of its text ending with "
                f"{completion.finish_reason!r}",
            )


def _completions(body: BatchBody) -> Iterator[tuple[str, Completion]]:
    for group in body.groups:
        for position, completion in enumerate(group.completions):
            yield f"task {group.task.index}, completion {position}", completion
