#!/usr/bin/env python
"""False positives and false negatives of the provenance check, counted (docs/PROTOCOL.md,
"Who recomputes, and the tolerances").

A publisher samples one batch with its adapter A and the batch's public seeds (``--prompts``
task prompts of the default preset x ``--group`` completions, up to ``--new-tokens`` tokens, the
node's stop tokens). Each completion is then recomputed under A with its seed
(``node.provenance.recompute.group_margins``) and judged by the two tolerances
(``node.provenance.check``): an honest completion below the soft tolerance is a false positive
(excluded), below the hard one a false flag. Then the same batch forged six ways, each claimed as
A's with the batch's seeds:

- ``written``:           the reference answer in the strict format, then the stop token;
- ``edited``:            each honest completion with one token, at a random position, replaced;
- ``other-seeds``:       A sampling with another peer's seeds (honest samples of someone else);
- ``other-adapter``:     adapter B sampling with another peer's seeds;
- ``B-right-seeds``:     adapter B sampling with the batch's seeds;
- ``base-right-seeds``:  the base model (no adapter) with the batch's seeds.

A forged completion whose tokens equal the honest one is no forgery (it is what A sampled) and
is counted apart; every other one the check misses (not excluded) is a false negative.

A and B: two checkpoints' ``adapter_model.safetensors`` (``--adapter``, ``--other``, e.g. two
nodes' of an experiment's ``units/*/node-*/round-*/``), else random rank-16 adapters.
Usage: .venv/bin/python scripts/measure_provenance_rates.py [--adapter A] [--other B]
       [--prompts 8] [--group 8] [--new-tokens 32] [--threads N] [--model shipped|tiny]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence

import torch
from safetensors.torch import load_file

from node.defaults import SHIPPED_MODEL
from node.policy.adapters import LORA_TARGETS, AdapterPool, LoraSettings, OptimizerSettings
from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.model import encode_prompts, load_base, stop_token_ids
from node.provenance.check import HARD_TOLERANCE, SOFT_TOLERANCE
from node.provenance.recompute import group_margins
from node.provenance.seeds import batch_seeds
from node.tasks import DEFAULT_PRESET_NAME, TaskItem, derive_tasks, get_preset
from node.tasks.prompts import build_messages

PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OTHER_PEER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
ROUND_SEED = bytes(range(32))
LORA = LoraSettings(rank=16, alpha=32, target_modules=LORA_TARGETS["attention+mlp"])
Completions = list[list[list[int]]]  # per prompt, per completion: token ids


def main() -> None:
    args = _arguments()
    if args.threads:
        torch.set_num_threads(args.threads)
    base = load_base(SHIPPED_MODEL if args.model == "shipped" else "tiny", dtype="float32")
    pool = AdapterPool(base)
    _add(pool, "A", args.adapter, seed=1)
    _add(pool, "B", args.other, seed=2)
    tasks = _tasks(args.prompts)
    prompts = encode_prompts(base.tokenizer, [build_messages(t) for t in tasks])
    own = batch_seeds(ROUND_SEED, PEER, range(len(tasks)), args.group)
    other = batch_seeds(ROUND_SEED, OTHER_PEER, range(len(tasks)), args.group)
    stops = stop_token_ids(base.tokenizer)
    sampling = SamplingConfig(max_new_tokens=args.new_tokens)

    def sample(adapter: str | None, seeds: Sequence[Sequence[bytes]]) -> Completions:
        request = GenerationRequest(prompts, completion_seeds=seeds)
        with pool.reference() if adapter is None else pool.activate(adapter) as model:
            (groups,) = generate_together(
                model, base.tokenizer, [request], num_completions=args.group,
                sampling=sampling, stop_ids=stops,
            )  # fmt: skip
        return [[list(c.token_ids) for c in group] for group in groups]

    honest = sample("A", own)
    forgeries = {
        "written": _written(base.tokenizer, tasks, args.group, stops[0]),
        "edited": _edited(honest, len(base.tokenizer), random.Random(0)),
        "other-seeds": sample("A", other),
        "other-adapter": sample("B", other),
        "B-right-seeds": sample("B", own),
        "base-right-seeds": sample(None, own),
    }
    print(
        f"{base.name}, fp32, {torch.get_num_threads()} threads: {len(tasks)} prompts x "
        f"G={args.group} x up to {args.new_tokens} tokens; soft tolerance {SOFT_TOLERANCE:g}, "
        f"hard {HARD_TOLERANCE:g}"
    )
    with pool.activate("A") as model:
        worsts = _worst_margins(model, prompts, honest, own)
        print(_honest_line(worsts))
        for kind, forged in forgeries.items():
            differing = [
                (p, i) for p, group in enumerate(forged) for i, ids in enumerate(group)
                if ids != honest[p][i]
            ]  # fmt: skip
            margins = _worst_margins(model, prompts, forged, own)
            print(_forgery_line(kind, margins, differing, len(tasks) * args.group))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", help="the publisher's adapter_model.safetensors (A)")
    parser.add_argument("--other", help="another adapter_model.safetensors (B)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--model", choices=["shipped", "tiny"], default="shipped")
    return parser.parse_args()


def _add(pool: AdapterPool, name: str, path: str | None, *, seed: int) -> None:
    """Adds adapter ``name``: a checkpoint's weights, or random ones (B drawn too: a fresh
    adapter's B is zero and samples exactly as the base does)."""
    pool.add(name, LORA, OptimizerSettings(), seed=seed)
    if path:
        pool.load_adapter_state(name, load_file(path))
        return
    draws = torch.Generator().manual_seed(seed)
    state = {
        k: torch.randn(v.shape, generator=draws) * 0.01 if "lora_B" in k else v
        for k, v in pool.adapter_state(name).items()
    }
    pool.load_adapter_state(name, state)


def _tasks(count: int) -> list[TaskItem]:
    items, round_ = [], 0
    while len(items) < count:
        items += derive_tasks(round_.to_bytes(32, "big"), PEER, get_preset(DEFAULT_PRESET_NAME))
        round_ += 1
    return items[:count]


def _written(tokenizer, tasks: Sequence[TaskItem], group: int, stop: int) -> Completions:  # type: ignore[no-untyped-def]
    """The reference answer in the strict format, stopped, for every completion."""
    return [
        [tokenizer.encode(f"<answer>{t.answer}</answer>", add_special_tokens=False) + [stop]]
        * group
        for t in tasks
    ]


def _edited(honest: Completions, vocabulary: int, rng: random.Random) -> Completions:
    """Each honest completion with the token at one random position replaced by another."""
    out = []
    for group in honest:
        edited = []
        for ids in group:
            ids = list(ids)
            at = rng.randrange(len(ids))
            ids[at] = (ids[at] + rng.randrange(1, vocabulary)) % vocabulary
            edited.append(ids)
        out.append(edited)
    return out


def _worst_margins(model, prompts, completions: Completions, seeds) -> list[list[float]]:  # type: ignore[no-untyped-def]
    return [
        [m.worst for m in group_margins(model, prompt, group, row)]
        for prompt, group, row in zip(prompts, completions, seeds, strict=True)
    ]


def _honest_line(worsts: list[list[float]]) -> str:
    flat = [w for group in worsts for w in group]
    excluded = sum(w < -SOFT_TOLERANCE for w in flat)
    flagged = sum(w < -HARD_TOLERANCE for w in flat)
    return (
        f"honest            {len(flat):4d} completions: {excluded} excluded, {flagged} flagged "
        f"(false positives); worst margin {min(flat):+.1e}"
    )


def _forgery_line(
    kind: str, worsts: list[list[float]], differing: list[tuple[int, int]], total: int
) -> str:
    caught = sum(worsts[p][i] < -SOFT_TOLERANCE for p, i in differing)
    flagged = sum(worsts[p][i] < -HARD_TOLERANCE for p, i in differing)
    missed = len(differing) - caught
    return (
        f"{kind:17s} {len(differing):4d} of {total} differ from the honest sample: {caught} "
        f"excluded, {flagged} flagged, {missed} missed (false negatives)"
    )


if __name__ == "__main__":
    main()
