"""Rewards: the answer inside ``<answer>...</answer>``, scored by the task's own dataset scorer.

Publisher and verifier run exactly this code on the same text and finish reason, so a reward is
reproducible. The task carries its preset's rule (``TaskItem.scoring``):

- ``"dataset"``: ``score_answer`` of ``extract_answer``; the finish reason is ignored.
- ``"strict"`` (``score_strict``): 1.0 only for a completion that stopped (finish reason
  ``"stop"``), holds exactly one ``<answer>`` and one ``</answer>`` in that order, nothing but
  whitespace after the closing tag, and an answer the dataset scorer gives exactly 1.0; else 0.0.
  So no junk tail, no cut completion, no hedged answers and no partial credit. For any text of at
  most ``MAX_SCAN_CHARS`` characters (every batch's), strict never exceeds dataset.

The parts:

- ``extract_answer`` looks only at the last ``MAX_SCAN_CHARS`` characters of a completion (a
  batch's completions are at most 8,192 characters, so for valid batches this is everything). It
  takes the last closing tag, the last opening tag before it, and the first closing tag after that
  opening tag: the last pair whose content holds no tag. Three ``str`` scans, linear time, no
  regular expression to backtrack. Tags are lower-case and exact; the content is stripped.
- ``score_answer`` runs the dataset's own scorer, except where that scorer would ``eval``
  the answer (``safe_scorers``: an answer may come from any peer). It gives 0.0 when there is no
  answer, when the answer is longer than the dataset's limit (some scorers are quadratic or worse
  in the answer's length: propositional logic spends ~1 s on 1,000 characters of '¬'; no
  reference answer comes near a limit), or when the scorer raises; otherwise the scorer's value,
  clamped to [0, 1]. It never raises.
"""

from __future__ import annotations

import logging
import math

from node.learning_data import FinishReason
from node.tasks import generator
from node.tasks.derivation import TaskItem

log = logging.getLogger(__name__)

OPEN_TAG = "<answer>"
CLOSE_TAG = "</answer>"
MAX_SCAN_CHARS = 65_536

# Longest answer handed to a scorer; longer ones score 0.0 without running it.
MAX_ANSWER_CHARS = 1_024
ANSWER_CHAR_LIMITS = {"propositional_logic": 128}  # its parser: ~13 ms at 128 chars, worst case


def extract_answer(text: str) -> str | None:
    """The stripped text inside the last ``<answer>...</answer>`` pair of ``text``; None if none."""
    if not isinstance(text, str):
        return None
    text = text[-MAX_SCAN_CHARS:]
    close = text.rfind(CLOSE_TAG)
    if close < 0:
        return None
    start = text.rfind(OPEN_TAG, 0, close)
    if start < 0:
        return None
    start += len(OPEN_TAG)
    # Tags between start and close would be nested ones: take the first pair after ``start``.
    end = text.find(CLOSE_TAG, start)
    return text[start:end].strip()


def answer_char_limit(dataset: str) -> int:
    """Longest answer (in characters) that ``score_completion`` hands to ``dataset``'s scorer."""
    return ANSWER_CHAR_LIMITS.get(dataset, MAX_ANSWER_CHARS)


def score_answer(item: TaskItem, answer: str | None) -> float:
    """The dataset's own score of an already extracted ``answer`` for ``item``, in [0, 1]."""
    if not isinstance(answer, str) or len(answer) > answer_char_limit(item.dataset):
        return 0.0
    try:
        value = float(generator.score(item.dataset, item.config, answer, item.entry()))
    except Exception as exc:  # a scorer choking on odd text (RecursionError included) is a 0
        log.debug("scorer of %s raised on item %d: %r", item.dataset, item.index, exc)
        return 0.0
    if not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, value))


def strict_answer(text: str, finish_reason: FinishReason | None) -> str | None:
    """The stripped answer of a completion in the strict format; None if it is not in it.

    The format: it stopped, holds one ``<answer>`` then one ``</answer>``, and only whitespace
    follows. Text before ``<answer>`` is allowed (the prompt asks for brief reasoning).
    """
    # None (a batch that does not say why the completion ended) is no proof of a stop.
    if finish_reason != "stop" or not isinstance(text, str):
        return None
    if text.count(OPEN_TAG) != 1 or text.count(CLOSE_TAG) != 1:
        return None
    start, close = text.find(OPEN_TAG), text.find(CLOSE_TAG)
    if close < start or text[close + len(CLOSE_TAG) :].strip():
        return None
    return text[start + len(OPEN_TAG) : close].strip()


def score_strict(item: TaskItem, completion_text: str, finish_reason: FinishReason | None) -> float:
    """The ``"strict"`` reward: exactly 1.0 or 0.0 (see the module docstring); never raises."""
    exact = score_answer(item, strict_answer(completion_text, finish_reason)) == 1.0
    return 1.0 if exact else 0.0


def score_completion(
    item: TaskItem, completion_text: str, *, finish_reason: FinishReason | None
) -> float:
    """Reward of a completion for ``item`` under its preset's rule; never raises.

    ``finish_reason`` is why the completion ended, None where unknown (a batch that does not
    carry it); only the ``"strict"`` rule reads it.
    """
    if item.scoring == "strict":
        return score_strict(item, completion_text, finish_reason)
    return score_answer(item, extract_answer(completion_text))
