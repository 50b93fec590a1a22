"""Held-out evaluation: each node's current policy, greedy, on a fixed task set never trained on.

Training reward is a noisy yardstick: every round brings new questions, sampled at temperature
1. Every ``eval_every`` rounds the experiment also answers one fixed set of the preset's tasks
greedily (temperature 0, one completion each) with every node's current adapter, and records
accuracy (mean score) and format rate (share of answers in the strict answer format,
``node.tasks.scoring.strict_answer``: stopped before the token limit, one ``<answer>...</answer>``
and nothing after it); a node below 50 % has collapsed (``eval.csv``'s ``collapsed``).

The set's item seeds come from their own domain,
``uint64(keccak256("swarm.heldout/1" ‖ preset name ‖ "\\n" ‖ uint32_be(k)))`` for k = 0, 1, ...,
drawn like training items (entry by ``draw_entry``, then the entry's generator), so no training
round derives them (training seeds hash the round seed and a peer address). Small task spaces
still repeat *questions*: one-digit addition has 121, so some held-out questions also appear in
training. The set measures the policy on the preset's distribution, not memorisation-free
generalisation.

All nodes are evaluated in shared forward passes (``generate_together``), each row through its
node's adapter.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from eth_utils import keccak

from node.policy.adapters import AdapterPool
from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.model import encode_prompts
from node.tasks import TaskItem, build_messages, get_preset
from node.tasks.derivation import task_from_seed
from node.tasks.scoring import score_completion, strict_answer

HELDOUT_DOMAIN = b"swarm.heldout/1"


@dataclass(frozen=True)
class Evaluation:
    """One node's result on the held-out set."""

    accuracy: float
    format_rate: float
    tasks: int
    seconds: float


def heldout_seed(preset_name: str, index: int) -> int:
    """Item seed ``index`` of the preset's held-out set (the module docstring's formula)."""
    data = HELDOUT_DOMAIN + preset_name.encode() + b"\n" + index.to_bytes(4, "big")
    return int.from_bytes(keccak(data)[:8], "big")


def heldout_tasks(preset_name: str, count: int) -> list[TaskItem]:
    """The first ``count`` held-out tasks of the preset (the same for every run)."""
    preset = get_preset(preset_name)
    return [task_from_seed(heldout_seed(preset.name, k), k, preset) for k in range(count)]


def evaluate(
    pool: AdapterPool,
    adapters: Sequence[str],
    tasks: Sequence[TaskItem],
    *,
    max_new_tokens: int,
    batch_sequences: int = 64,
) -> list[Evaluation]:
    """Each adapter's greedy answers to ``tasks``, scored; one result per adapter."""
    started = time.perf_counter()
    tokenizer = pool.base.tokenizer
    prompts = encode_prompts(tokenizer, [build_messages(task) for task in tasks])
    sampling = SamplingConfig(
        max_new_tokens=max_new_tokens, temperature=0.0, max_batch_sequences=batch_sequences
    )
    requests = [GenerationRequest(prompts, seed=0, adapter=name) for name in adapters]
    with pool.rows(list(adapters)) as routing:
        answers = generate_together(
            pool.model, tokenizer, requests, num_completions=1, sampling=sampling, routing=routing
        )
    seconds = time.perf_counter() - started
    results = []
    for per_task in answers:
        firsts = [group[0] for group in per_task]
        formatted = [strict_answer(a.text, a.finish_reason) for a in firsts]
        scores = [
            score_completion(task, a.text, finish_reason=a.finish_reason)
            for task, a in zip(tasks, firsts, strict=True)
        ]
        results.append(
            Evaluation(
                accuracy=sum(scores) / len(tasks),
                format_rate=sum(a is not None for a in formatted) / len(tasks),
                tasks=len(tasks),
                seconds=seconds,
            )
        )
    return results
