#!/usr/bin/env python
"""How far a recompute on other kernels drifts from the sampler: the tolerance's calibration.

Samples one batch with the seeded sampler in this process (fp32, default kernels and threads),
then recomputes every completion's margins (``node.provenance.recompute``) in fresh processes:
1 and 2 threads, each with torch's best kernels for this CPU and with AVX2 forced
(``ATEN_CPU_CAPABILITY=avx2``; the same as the default on a CPU without AVX-512). Prints each
variant's worst margin and how many completions fall below the soft tolerance (an honest
completion never should).

Usage: .venv/bin/python scripts/measure_sampler_drift.py [--model shipped|tiny] [--prompts 8]
       [--group 8] [--new-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from node.defaults import SHIPPED_MODEL
from node.policy.generation import GenerationRequest, SamplingConfig, generate_together
from node.policy.model import (
    TINY_MODEL,
    BaseModel,
    encode_prompts,
    load_base,
    load_tokenizer,
    tiny_model,
)
from node.provenance.check import SOFT_TOLERANCE
from node.provenance.recompute import group_margins
from node.provenance.seeds import batch_seeds
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset
from node.tasks.prompts import build_messages

PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
SCRIPT = Path(__file__).resolve()


def load_model(name: str) -> BaseModel:
    """The shipped model in fp32, or (``tiny``) the tiny random model with a peaked output layer
    (``tiny_model(peaked_head_seed=1)``, as the provenance tests use)."""
    if name != "tiny":
        return load_base(SHIPPED_MODEL, dtype="float32")
    tokenizer = load_tokenizer(TINY_MODEL)
    model = tiny_model(tokenizer, peaked_head_seed=1).eval().requires_grad_(False)
    return BaseModel(name=TINY_MODEL, model=model, tokenizer=tokenizer)


def sample_job(model_name: str, prompts: int, group: int, new_tokens: int, path: Path) -> None:
    """Samples a batch and writes what a recompute needs to ``path`` (JSON)."""
    base = load_model(model_name)
    preset = get_preset(DEFAULT_PRESET_NAME)
    tasks = derive_tasks(bytes(32), PEER, preset)[:prompts]
    prompt_ids = encode_prompts(base.tokenizer, [build_messages(task) for task in tasks])
    seeds = batch_seeds(bytes(32), PEER, range(len(prompt_ids)), group)
    (groups,) = generate_together(
        base.model,
        base.tokenizer,
        [GenerationRequest(prompt_ids, completion_seeds=seeds)],
        num_completions=group,
        sampling=SamplingConfig(max_new_tokens=new_tokens),
    )
    job = {
        "model": model_name,
        "prompts": prompt_ids,
        "completions": [[list(c.token_ids) for c in g] for g in groups],
        "seeds": [[s.hex() for s in row] for row in seeds],
    }
    path.write_text(json.dumps(job))


def recompute_job(path: Path) -> dict[str, Any]:
    """Recomputes the job at ``path`` here: the worst margin and the completions below -δ."""
    job = json.loads(path.read_text())
    base = load_model(job["model"])
    margins = [
        m
        for prompt, group, row in zip(job["prompts"], job["completions"], job["seeds"], strict=True)
        for m in group_margins(base.model, prompt, group, [bytes.fromhex(s) for s in row])
    ]
    return {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "worst": min(m.worst for m in margins),
        "below_soft": sum(m.worst < -SOFT_TOLERANCE for m in margins),
        "completions": len(margins),
    }


def recompute_elsewhere(path: Path, threads: int, capability: str | None) -> dict[str, Any]:
    """``recompute_job`` in a fresh process with ``threads`` threads and, if given, the ATen
    kernels of ``capability`` (e.g. ``avx2``)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--worker", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["shipped", "tiny"], default="shipped")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(recompute_job(args.worker)))
        return
    with tempfile.TemporaryDirectory() as folder:
        job = Path(folder) / "job.json"
        sample_job(args.model, args.prompts, args.group, args.new_tokens, job)
        print(
            f"sampled {args.prompts} x G={args.group} x <= {args.new_tokens} tokens with "
            f"{torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads"
        )
        for capability in (None, "avx2"):
            for threads in (1, 2):
                result = recompute_elsewhere(job, threads, capability)
                print(
                    f"recompute {result['capability']:7s} {result['threads']} threads: worst "
                    f"margin {result['worst']:+.2e}, {result['below_soft']} of "
                    f"{result['completions']} completions below -{SOFT_TOLERANCE:g}"
                )


if __name__ == "__main__":
    main()
