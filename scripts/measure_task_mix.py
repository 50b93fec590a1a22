#!/usr/bin/env python
"""What the shipped model scores on candidate task configs: the data for choosing a task mix.

GRPO learns only from groups whose rewards differ, so a dataset belongs in a preset for the
shipped SmolLM2-135M when the base model's reward sits between ~5 % and ~50 % and many groups have
signal. For each candidate (a reasoning-gym dataset with a config, as a preset entry would name
it) this samples G completions for each of N tasks with the node's own prompt and sampler
(three worked demonstrations, temperature 1) and prints the mean reward under both scoring rules,
the share of groups with signal under the strict rule, and the strict format and cut rates.

A candidate whose generator does not return an item within ``--item-timeout`` seconds is
reported as such and skipped (some reasoning-gym configs cannot satisfy their own constraints
and loop forever).

    .venv/bin/python scripts/measure_task_mix.py [--tasks 32] [--group 4] [--new-tokens 16]
        [--threads 2] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from node.learning_data import GeneratedCompletion  # noqa: E402
from node.tasks import Preset, PresetEntry, TaskItem, build_messages  # noqa: E402
from node.tasks.derivation import derive_item_seed, task_from_seed  # noqa: E402
from node.tasks.scoring import score_completion, strict_answer  # noqa: E402

_TWO_TERMS = {"min_terms": 2, "max_terms": 2, "allow_parentheses": False, "allow_negation": False}

#: name -> (dataset, config): the candidates measured by default.
CANDIDATES: dict[str, tuple[str, dict[str, Any]]] = {
    "add-1": ("basic_arithmetic", {**_TWO_TERMS, "min_digits": 1, "max_digits": 1, "operators": ["+"]}),  # noqa: E501
    "sub-1": ("basic_arithmetic", {**_TWO_TERMS, "min_digits": 1, "max_digits": 1, "operators": ["-"]}),  # noqa: E501
    "mul-1": ("basic_arithmetic", {**_TWO_TERMS, "min_digits": 1, "max_digits": 1, "operators": ["*"]}),  # noqa: E501
    "addsub-2": (
        "basic_arithmetic",
        {**_TWO_TERMS, "min_digits": 2, "max_digits": 2, "operators": ["+", "-"]},
    ),
    "add3-1": (
        "basic_arithmetic",
        {**_TWO_TERMS, "min_terms": 3, "max_terms": 3, "min_digits": 1, "max_digits": 1,
         "operators": ["+"]},
    ),  # fmt: skip
    "base-small": (
        "base_conversion",
        {"min_base": 2, "max_base": 10, "min_value": 0, "max_value": 31},
    ),
    "decimal-1": (
        "decimal_arithmetic",
        {"min_terms": 2, "max_terms": 2, "min_num_decimal_places": 1, "max_num_decimal_places": 1},
    ),
    "fraction-small": (
        "fraction_simplification",
        {"min_value": 1, "max_value": 10, "min_factor": 2, "max_factor": 3},
    ),
}


#: Where the measured items come from: a round seed and a peer no swarm uses.
SEED, PEER = b"swarm.measure/1".ljust(32, b"\0"), "0x" + "5a" * 20


class ItemTimeout(BaseException):
    """A generator ran past the timeout (a BaseException, so that the preset's own validation,
    which turns a generator's exceptions into a config error, lets it through)."""


def candidate_tasks(name: str, count: int, item_timeout: float) -> list[TaskItem]:
    """``count`` items of the candidate, drawn as a preset with that one entry would draw them
    (ItemTimeout when building the preset, which generates one item, or any item takes longer
    than ``item_timeout``)."""
    dataset, config = CANDIDATES[name]

    def timed_out(*_: object) -> None:
        raise ItemTimeout(name)

    previous = signal.signal(signal.SIGALRM, timed_out)
    try:
        signal.setitimer(signal.ITIMER_REAL, item_timeout)
        preset = Preset(
            name=f"measure-{name}",
            tasks_per_round=1,
            entries=(PresetEntry(dataset=dataset, weight=1.0, config=config),),
            scoring="strict",
        )
        tasks = []
        for k in range(count):
            signal.setitimer(signal.ITIMER_REAL, item_timeout)
            tasks.append(task_from_seed(derive_item_seed(SEED, PEER, k), k, preset))
        return tasks
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def measure(tasks: list[TaskItem], groups: list[list[GeneratedCompletion]]) -> dict[str, float]:
    """Mean rewards under both rules, share of strict groups with signal, format and cut rates."""
    strict, loose, formatted, cut, with_signal = [], [], [], [], 0
    for task, group in zip(tasks, groups, strict=True):
        scores = [score_completion(task, c.text, finish_reason=c.finish_reason) for c in group]
        as_dataset = task.model_copy(update={"scoring": "dataset"})
        strict += scores
        loose += [score_completion(as_dataset, c.text, finish_reason=c.finish_reason) for c in group]
        formatted += [strict_answer(c.text, c.finish_reason) is not None for c in group]
        cut += [c.finish_reason == "length" for c in group]
        with_signal += len(set(scores)) > 1
    n = len(strict)
    return {
        "strict": sum(strict) / n,
        "dataset": sum(loose) / n,
        "signal": with_signal / len(tasks),
        "format": sum(formatted) / n,
        "cut": sum(cut) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--item-timeout", type=float, default=5.0)
    parser.add_argument("--only", nargs="*", choices=sorted(CANDIDATES), help="candidates to run")
    args = parser.parse_args()

    import torch

    from node.policy.generation import SamplingConfig, generate

    torch.set_num_threads(args.threads)
    from node.policy.model import load_base

    base = load_base("smollm2-135m", device="cpu")
    sampling = SamplingConfig(max_new_tokens=args.new_tokens, temperature=1.0)
    print(f"{'candidate':<16}{'strict':>8}{'dataset':>9}{'signal':>8}{'format':>8}{'cut':>6}")
    for name in args.only or CANDIDATES:
        try:
            tasks = candidate_tasks(name, args.tasks, args.item_timeout)
        except ItemTimeout:
            print(f"{name:<16} generator gave no item within {args.item_timeout} s: skipped")
            continue
        prompts = [build_messages(t) for t in tasks]
        groups = generate(
            base.model, base.tokenizer, prompts, num_completions=args.group, sampling=sampling,
            seed=0,
        )  # fmt: skip
        m = measure(tasks, groups)
        print(
            f"{name:<16}{m['strict']:>8.3f}{m['dataset']:>9.3f}{m['signal']:>8.2f}"
            f"{m['format']:>8.2f}{m['cut']:>6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
