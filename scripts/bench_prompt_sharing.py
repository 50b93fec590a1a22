#!/usr/bin/env python
"""The GRPO update's pass with completions packed on their prompt's cache, against copies of it.

``node.policy.prompt_sharing.shared_prompt_hidden`` runs each group's prompt once, then the
group's G completions on top of its key/value cache. Two ways, timed in one process:

- copied (the baseline): the cache repeated G times, one row per completion;
- packed (the default): a group's G completions side by side in one row on the one cache, each
  seeing the prompt and its own earlier tokens only (a prepared 4D attention mask).

The workload is one batched update's pass of the experiment: the shipped SmolLM2, 4 adapters,
4 tasks each of the ``smol-easy`` preset, G = 4 completions of up to 16 tokens sampled by the
adapters (``generate_together``), all 16 groups in one pass routed to their adapters; forward
(``shared_prompt_hidden`` and the chosen tokens' log-probs) and backward, under the update's
attention (``training_attention``), in float32 and, where the update would pick it, bf16
autocast. The two ways alternate, ``--repeats`` times each after a warm-up; the medians and their
ratio are printed, with the largest difference of the log-probs between the ways.

Usage: .venv/bin/python scripts/bench_prompt_sharing.py [--repeats 7] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator

import torch

from node.learning_data import GeneratedCompletion, ScoredGroup
from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings
from node.policy.attention import training_attention
from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.grpo import chosen_token_logprobs, group_advantages, tokenize_group
from node.policy.model import encode_prompts, load_base
from node.policy.precision import (
    frozen_linear_as,
    frozen_weights_as,
    resolve_precision,
    training_autocast,
)
from node.policy.prompt_sharing import TokenizedGroup, shared_prompt_hidden
from node.tasks import build_messages, derive_tasks, get_preset

NODES, TASKS, G, NEW_TOKENS = 4, 4, 4, 16


def experiment_samples(
    pool: AdapterPool, names: list[str], tasks: int = TASKS, size: int = G
) -> tuple[list[list[list[int]]], list[list[list[GeneratedCompletion]]]]:
    """Each adapter's first ``tasks`` tasks of the ``smol-easy`` preset (its prompt ids), and
    ``size`` completions of each that it sampled, up to ``NEW_TOKENS``."""
    tokenizer, preset = pool.base.tokenizer, get_preset("smol-easy")
    prompts = [
        encode_prompts(tokenizer, [build_messages(t) for t in derive_tasks(
            bytes(32), f"0x{i + 1:040x}", preset)[:tasks]])
        for i in range(len(names))
    ]  # fmt: skip
    requests = [GenerationRequest(p, i, n) for i, (p, n) in enumerate(zip(prompts, names))]
    with pool.rows(names) as routing:
        samples = generate_together(
            pool.model, tokenizer, requests, num_completions=size,
            sampling=SamplingConfig(max_new_tokens=NEW_TOKENS), routing=routing,
        )  # fmt: skip
    return prompts, samples


def experiment_groups(pool: AdapterPool, names: list[str]) -> list[TokenizedGroup]:
    """Each adapter's 4 tasks with G completions it sampled, tokenised as the update does."""
    tokenizer = pool.base.tokenizer
    prompts, samples = experiment_samples(pool, names)
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0])
    return [
        tokenize_group(ScoredGroup(list(p), list(c), rewards.tolist()),
                       group_advantages(rewards), tokenizer, NEW_TOKENS)
        for ps, cs in zip(prompts, samples) for p, c in zip(ps, cs)
    ]  # fmt: skip


def one_pass(
    pool: AdapterPool,
    groups: list[TokenizedGroup],
    adapters: list[str],
    dtype: torch.dtype | None,
    *,
    packed: bool = True,
    stacked: bool = True,
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """Seconds of one forward and backward, the log-probs and the adapters' gradients (one
    vector), the completions ``packed`` or not, the adapters ``stacked`` or run by run."""
    device = torch.device("cpu")
    model = pool.model
    started = time.perf_counter()
    with (
        pool.rows(adapters, trainable=True, stacked=stacked) as routing,
        training_attention(model, device),
        frozen_weights_as(dtype, model),
        training_autocast(dtype, device),
    ):
        hidden, targets = shared_prompt_hidden(
            model, groups, pool.base.tokenizer.pad_token_id,
            adapters=adapters, routing=routing, packed=packed,
        )  # fmt: skip
        head = frozen_linear_as(dtype, model.get_output_embeddings())
        logps = chosen_token_logprobs(hidden, targets, head, chunk_tokens=256)
        logps.sum().backward()
    seconds = time.perf_counter() - started
    grads = torch.cat([
        p.grad.flatten() for name in dict.fromkeys(adapters)
        for p in pool.adapter_parameters(name).values()
    ])  # fmt: skip
    model.zero_grad(set_to_none=True)
    return seconds, logps.detach().float(), grads


def bench_arguments(doc: str, repeated: str) -> argparse.Namespace:
    """The policy benchmarks' command line (``--repeats`` of ``repeated``, ``--threads``),
    parsed, with torch's threads set and its seed fixed."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help=f"timed {repeated}")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    return args


def experiment_pool(*, trained: bool = False) -> tuple[AdapterPool, list[str]]:
    """``NODES`` adapters over the shipped SmolLM2, and their names. New adapters start as the
    base (B is zero); ``trained`` draws their B, so that each adapter computes its own."""
    pool, names = AdapterPool(load_base("smollm2-135m")), [f"n{i}" for i in range(NODES)]
    for i, name in enumerate(names):
        pool.add(name, LoraSettings(), OptimizerSettings(lr=5e-4), seed=i)
        if trained:
            with torch.no_grad():
                for key, param in pool.adapter_parameters(name).items():
                    if "lora_B" in key:
                        param.normal_(0, 0.01)
    return pool, names


def precisions() -> Iterator[tuple[str, torch.dtype | None]]:
    """float32, then bf16 autocast where the update would pick it (said where it would not)."""
    yield "float32", None
    dtype = resolve_precision("auto", torch.device("cpu"))
    if dtype is None:
        print("auto: float32 on this machine (no faster bf16), not measured again")
    else:
        yield "bf16 autocast", dtype


def alternated(
    pool: AdapterPool,
    groups: list[TokenizedGroup],
    adapters: list[str],
    dtype: torch.dtype | None,
    repeats: int,
    ways: dict[str, dict[str, bool]],
) -> dict[str, tuple[float, torch.Tensor, torch.Tensor]]:
    """Each way's (``one_pass``'s keywords) median seconds over ``repeats`` passes after a
    warm-up, the ways alternating, with its last pass's log-probs and gradients."""
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    last: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for repeat in range(repeats + 1):
        for way, keywords in ways.items():
            spent, logps, grads = one_pass(pool, groups, adapters, dtype, **keywords)
            last[way] = (logps, grads)
            if repeat:  # the first of each is a warm-up
                seconds[way].append(spent)
    return {way: (statistics.median(seconds[way]), *last[way]) for way in ways}


def main() -> None:
    args = bench_arguments(__doc__, "passes of each way")

    pool, names = experiment_pool()
    groups = experiment_groups(pool, names)
    adapters = [n for n in names for _ in range(TASKS)]
    tokens = sum(g.num_tokens for g in groups)
    print(f"{len(groups)} groups x G = {G}, {tokens} completion tokens, "
          f"prompts of {min(len(g.prompt_ids) for g in groups)}-"
          f"{max(len(g.prompt_ids) for g in groups)} tokens, {args.threads} threads")  # fmt: skip

    ways = {"copied": {"packed": False}, "packed": {"packed": True}}
    for label, dtype in precisions():
        result = alternated(pool, groups, adapters, dtype, args.repeats, ways)
        (copied, copied_logps, _), (packed, packed_logps, _) = result["copied"], result["packed"]
        gap = float((packed_logps - copied_logps).abs().max())
        print(f"{label}: copied {copied:.3f} s, packed {packed:.3f} s (median of "
              f"{args.repeats}): {copied / packed:.2f}x; log-probs differ by at most "
              f"{gap:.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
