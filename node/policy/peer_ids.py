"""A batch's completions as the trainer takes them: sampled ids where they are this node's own
tokenizer's and agree with the text, else the text.

A batch (``swarm.rollouts/3``) names the tokenizer its token ids belong to by
:func:`tokenizer_digest`. A receiver with the same digest trains on the ids as they were sampled
(no re-tokenisation, the stop exactly as sampled), after checking that they are what the text
says: every id in the vocabulary, exactly one stop token and at the end when the finish reason is
``"stop"``, none when it is ``"length"``, and the ids before the stop decode to the text
(``decode_completion``, as the sampler decodes). The rewards were verified on the text, so ids
that say something else are not trained on: the completion falls back to its text. A receiver
with another tokenizer takes the text and the finish reason (``node.policy.grpo`` tokenises it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Protocol

from transformers import PreTrainedTokenizerBase

from node.learning_data import (
    FinishReason,
    GeneratedCompletion,
    TextCompletion,
    TrainedCompletion,
)
from node.policy.generation import decode_completion
from node.policy.model import end_of_turn_id, stop_token_ids


class BatchCompletion(Protocol):
    """What a batch records of a completion (``node.rollouts.schema.Completion``)."""

    text: str
    finish_reason: FinishReason
    token_ids: list[int] | None
    logprobs: list[float] | None


def tokenizer_digest(tokenizer: PreTrainedTokenizerBase) -> str:
    """``0x`` + SHA-256 of the tokenizer's id -> token table and its stop ids, as canonical JSON
    ``{"stop": [...], "tokens": [...]}`` (docs/PROTOCOL.md, "Batch document"). Equal digests: the
    same ids mean the same tokens, and the same ids end a turn."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    document = {"stop": sorted(stop_token_ids(tokenizer)), "tokens": tokens}
    encoded = json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return "0x" + hashlib.sha256(encoded.encode("utf-8")).hexdigest()


class PeerIds:
    """Turns a batch's completions into trained completions for one node's tokenizer."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.digest = tokenizer_digest(tokenizer)
        self.stops = frozenset(stop_token_ids(tokenizer))
        self.vocabulary = len(tokenizer)

    def trained(
        self, completions: Sequence[BatchCompletion], batch_tokenizer: str | None
    ) -> list[TrainedCompletion]:
        """Each completion as sampled ids when the batch's tokenizer is this node's and the ids
        agree with the text (the module docstring); else as its text and finish reason."""
        same = batch_tokenizer is not None and batch_tokenizer == self.digest
        return [self._one(c) if same else _as_text(c) for c in completions]

    def _one(self, completion: BatchCompletion) -> TrainedCompletion:
        ids = completion.token_ids
        if ids is None or not self.agrees(ids, completion.text, completion.finish_reason):
            return _as_text(completion)
        logprobs = completion.logprobs
        return GeneratedCompletion(
            text=completion.text,
            token_ids=tuple(ids),
            finish_reason=completion.finish_reason,
            logprobs=None if logprobs is None else tuple(logprobs),
        )

    def agrees(self, ids: Sequence[int], text: str, finish_reason: FinishReason) -> bool:
        """Whether ``ids`` are a sampling of ``text`` ending as ``finish_reason`` says."""
        if not ids or any(i >= self.vocabulary for i in ids):
            return False
        body = ids[:-1] if finish_reason == "stop" else ids
        if finish_reason == "stop" and ids[-1] not in self.stops:
            return False
        if any(i in self.stops for i in body):
            return False
        return decode_completion(self.tokenizer, body) == text


def written_completion(
    tokenizer: PreTrainedTokenizerBase, text: str, finish_reason: FinishReason = "stop"
) -> GeneratedCompletion:
    """``text`` as a sampler that wrote it would publish it: its tokens, then the end-of-turn
    token if it stopped, each with log-prob 0 (a writer claims what it likes). For batches built
    without sampling (tests, benchmarks, the spec's vectors, forgeries). ValueError for a text
    the tokens do not give back."""
    ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
    if decode_completion(tokenizer, list(ids)) != text:
        raise ValueError(f"{text!r} does not decode back from its tokens")
    stop = (end_of_turn_id(tokenizer),) if finish_reason == "stop" else ()
    return GeneratedCompletion(text, ids + stop, finish_reason, (0.0,) * len(ids + stop))


def _as_text(completion: BatchCompletion) -> TextCompletion:
    return TextCompletion(completion.text, completion.finish_reason)
