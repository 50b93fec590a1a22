"""Chat prompts for a task: the answer format, three worked demonstrations, then the question.

Told the format only in words, the shipped SmolLM2-135M-Instruct never used the answer tags (0 of
192 samples); with three demonstrations given as earlier chat turns (user question, assistant
``<answer>7</answer>``) it used them in 83-98% of samples (docs/DESIGN.md, "Tasks and prompts").
So every prompt carries
them.

Demonstrations come from the same generator as the task (same dataset and config) but from a
seed space no task can use. For a (dataset, config) pair::

    base = 2**64 + uint64(first 8 bytes of keccak256("swarm.demos/1" ‖ dataset ‖ "\\n" ‖ config_json))
    pool = create_dataset(dataset, seed=base, size=DEMO_POOL_SIZE, **config)

``config_json`` is the canonical JSON of the config (sorted keys, no spaces). reasoning-gym seeds
pool item k with ``random.Random(base + k)``, and ``base + k >= 2**64`` while every task seed is
a uint64, so the seeds never coincide. Short questions can still repeat by content (one-digit
addition has 121), so a prompt skips any pool item whose question equals the task's own, and any
whose reference answer does not score 1.0 (a few generated ``propositional_logic`` examples are not
valid conclusions); it takes the first ``DEMOS_PER_PROMPT`` that remain, in pool order.

Prompts are not part of the protocol (only rewards are checked), but keeping them fixed keeps
rollouts comparable across nodes.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache

from eth_utils import keccak

from node.tasks import generator
from node.tasks.derivation import TaskItem

log = logging.getLogger(__name__)

DEMO_DOMAIN = b"swarm.demos/1"
DEMOS_PER_PROMPT = 3
DEMO_POOL_SIZE = 16

SYSTEM_PROMPT = (
    "Solve the problem. Reason briefly if you need to, then write only the final answer "
    "between <answer> and </answer> tags, like <answer>42</answer>."
)


def demo_seed_base(dataset: str, config: dict) -> int:
    """First seed of the demonstration pool of (dataset, config); always >= 2**64."""
    digest = keccak(DEMO_DOMAIN + dataset.encode() + b"\n" + generator.config_key(config).encode())
    return 2**64 + int.from_bytes(digest[:8], "big")


def demonstrations(item: TaskItem) -> list[tuple[str, str]]:
    """The (question, answer) demonstrations shown before ``item``'s question."""
    pool = _demo_pool(item.dataset, generator.config_key(item.config))
    chosen = [demo for demo in pool if demo[0] != item.question][:DEMOS_PER_PROMPT]
    if len(chosen) < DEMOS_PER_PROMPT:  # not seen for the shipped presets
        log.warning("only %d demonstrations for %s", len(chosen), item.dataset)
    return chosen


def build_messages(item: TaskItem) -> list[dict[str, str]]:
    """Chat messages for ``item``: system (format), 3 user/assistant demonstrations, question."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for question, answer in demonstrations(item):
        messages.append({"role": "user", "content": question})
        messages.append({"role": "assistant", "content": f"<answer>{answer}</answer>"})
    messages.append({"role": "user", "content": item.question})
    return messages


@lru_cache(maxsize=256)
def _demo_pool(dataset: str, key: str) -> tuple[tuple[str, str], ...]:
    """Pool items of (dataset, config) with a reference answer that scores 1.0, in pool order."""
    config = json.loads(key)
    raws = generator.generate(
        dataset, config, seed=demo_seed_base(dataset, config), size=DEMO_POOL_SIZE
    )
    pool = []
    for raw in raws:
        answer = raw["answer"]
        if answer is None:  # e.g. propositional_logic: any valid conclusion scores; it gives one
            answer = raw["metadata"].get("example_answer")
        if not isinstance(answer, str):
            continue
        try:
            if generator.score(dataset, config, answer, raw) != 1.0:
                continue
        except Exception:  # a scorer that cannot score its own example is no demonstration
            continue
        pool.append((raw["question"], answer))
    return tuple(pool)
