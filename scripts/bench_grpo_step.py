#!/usr/bin/env python
"""One GRPO step's time and peak memory: chunked log-probs against checkpointed and naive ones.

The workload: the shipped SmolLM2-135M with a LoRA adapter (r 16, alpha 32, attention
projections), one group of G=8 completions of ~100 tokens after a ~60-token chat prompt (8 x ~160
tokens), one micro-batch, one iteration, no KL. Three variants of the same ``GRPOTrainer.step``:

- chunked: ``node.policy.grpo.chosen_token_logprobs`` (logits ``--chunk-tokens`` rows at a time,
           each chunk's logits recomputed in backward, ``grpo._ChunkLogprobs``);
- checkpointed: the same chunks, each recomputed whole in backward by activation checkpointing
           (the way before ``grpo._ChunkLogprobs``, still taken by a head that trains:
           ``grpo._frozen`` replaced so that every head counts as one);
- naive:   the completion positions' full (N, V) logits at once, ``log_softmax`` over all of
           them, then a gather (``grpo.chosen_token_logprobs`` replaced where the step calls it).

Each variant runs in its own fresh process (so one's freed memory cannot hide the other's peak):
one warm-up step, ``--steps`` timed steps (the median is reported), one step watched for memory.
Memory, two ways
(tracemalloc would not see torch's allocations):

- RSS: ``ru_maxrss`` from ``resource.getrusage``, the peak resident set of the whole process
  (model load included), and what it added over the RSS just before the first step (every weight
  paged in). It includes memory the C allocator freed but kept, so it varies from run to run;
- heap: the bytes the C allocator had handed out and not yet freed (glibc's ``mallinfo2``:
  ``uordblks + hblkhd``), sampled every millisecond by a thread during the last step; its peak
  over the level before the first step is the step's working memory. Linux with glibc only.
Usage: .venv/bin/python scripts/bench_grpo_step.py [--group 8] [--completion-tokens 100]
       [--micro-batch-size N] [--chunk-tokens 256] [--steps 3]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from unittest import mock

import torch

from node.learning_data import TextCompletion
from node.policy import grpo
from node.policy.adapters import AdapterPool, LoraSettings
from node.policy.grpo import GRPOConfig, GRPOTrainer, ScoredGroup
from node.policy.model import load_base

VARIANTS = ("chunked", "checkpointed", "naive")
PROMPT = [
    {
        "role": "user",
        "content": "Add the two numbers and put the result inside <answer></answer> tags. "
        "What is 37 + 48?",
    }
]
WORDS = "first add the tens then the ones so the total is carry one and check again".split()


CALLS = {"naive": 0, "checkpointed": 0}  # a replaced variant that never ran is refused


def naive_chosen_token_logprobs(
    hidden: torch.Tensor,
    targets: torch.Tensor,
    lm_head: Callable[[torch.Tensor], torch.Tensor],
    *,
    chunk_tokens: int,
    temperature: float = 1.0,
) -> torch.Tensor:
    """The textbook way: every completion position's full-vocabulary logits at once, their
    log-softmax, then a gather (no chunks, nothing recomputed in the backward pass)."""
    CALLS["naive"] += 1
    logp = torch.log_softmax(lm_head(hidden).float() / temperature, dim=-1)  # (N, V)
    return logp.gather(-1, targets[:, None]).squeeze(-1)  # (N,)


def never_frozen(lm_head: Callable[[torch.Tensor], torch.Tensor]) -> bool:
    """In place of ``grpo._frozen``: every head counts as one that trains, so the step's own
    ``chosen_token_logprobs`` recomputes each chunk whole by activation checkpointing."""
    CALLS["checkpointed"] += 1
    return False


#: variant -> (what the training step calls in ``grpo``, and what replaces it)
REPLACEMENTS = {
    "naive": ("chosen_token_logprobs", naive_chosen_token_logprobs),
    "checkpointed": ("_frozen", never_frozen),
}


def completions(  # type: ignore[no-untyped-def]
    tokenizer, group: int, tokens: int
) -> list[TextCompletion]:
    """``group`` different completions of about ``tokens`` tokens each, ended by a stop."""
    texts = []
    for i in range(group):
        words = [WORDS[(i + j * (i + 1)) % len(WORDS)] for j in range(tokens)]
        ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"][: tokens - 12]
        text = tokenizer.decode(ids) + f" <answer>{80 + i}</answer>"
        texts.append(TextCompletion(text, finish_reason="stop"))
    return texts


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
        )
    ]


def heap_in_use() -> Callable[[], int] | None:
    """A function returning the bytes glibc's malloc has handed out, or None without glibc."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2

    def read() -> int:
        info = mallinfo2()
        return info.uordblks + info.hblkhd

    return read


class HeapPeak:
    """Samples ``read()`` every millisecond on a thread while in the ``with`` block."""

    def __init__(self, read: Callable[[], int]) -> None:
        self.read, self.peak, self._stop = read, read(), threading.Event()

    def __enter__(self) -> HeapPeak:
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, self.read())


def current_rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(variant: str, args: argparse.Namespace) -> dict[str, float]:
    """Runs in the child process: warm-up + timed steps of one variant."""
    torch.manual_seed(0)
    base = load_base("smollm2-135m", device="cpu", dtype="float32")
    pool = AdapterPool(base)
    pool.add("node", LoraSettings(rank=16, alpha=32), seed=0)  # attention projections; active
    model = pool.model
    config = GRPOConfig(
        micro_batch_size=args.micro_batch_size or args.group,
        logprob_chunk_tokens=args.chunk_tokens,
        max_completion_tokens=args.completion_tokens + 16,
    )
    trainer = GRPOTrainer(model, base.tokenizer, config, pool.optimizer("node"))
    texts = completions(base.tokenizer, args.group, args.completion_tokens)
    rewards = [float(i % 3 == 0) for i in range(args.group)]
    groups = [ScoredGroup(PROMPT, texts, rewards)]

    with torch.no_grad():  # page in every weight (safetensors loads lazily), then take the baseline
        sum(float(p.sum()) for p in model.parameters())
    rss_before = current_rss_bytes()
    read_heap = heap_in_use()
    heap_before = read_heap() if read_heap else 0
    sampler = HeapPeak(read_heap) if read_heap else contextlib.nullcontext()
    patch = (
        # what the training step calls (grpo._Forward), so that the variants differ in fact
        mock.patch.object(grpo, *REPLACEMENTS[variant])
        if variant in REPLACEMENTS
        else contextlib.nullcontext()
    )
    seconds = []
    with patch:
        metrics = trainer.step(groups)  # warm-up
        for _ in range(args.steps):
            started = time.perf_counter()
            metrics = trainer.step(groups)
            seconds.append(time.perf_counter() - started)
        with sampler:  # one more step, watched (the sampling thread would skew the timings)
            trainer.step(groups)
    if any((variant == name) != (calls > 0) for name, calls in CALLS.items()):
        raise SystemExit(f"the {variant} variant ran the wrong log-probs: nothing to compare")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {
        "seconds": statistics.median(seconds),
        "peak_rss": peak,
        "rss_before": rss_before,
        "heap_added": sampler.peak - heap_before if read_heap else float("nan"),
        "sequences": metrics.num_sequences,
        "completion_tokens": metrics.num_tokens,
        "sequence_tokens": sequence_tokens(base.tokenizer, groups, config),
        "loss": metrics.loss,
        "grad_norm": metrics.grad_norm,
    }


def sequence_tokens(tokenizer, groups: list[ScoredGroup], config: GRPOConfig) -> int:  # type: ignore[no-untyped-def]
    """Prompt + completion tokens of all the step's sequences."""
    advantages = [torch.ones(len(g.completions)) for g in groups]
    tokenized = grpo.tokenize_groups(groups, advantages, tokenizer, config.max_completion_tokens)
    return sum(len(s.input_ids) for s in tokenized)


def gib(n: float) -> str:
    return f"{n / 2**30:5.2f} GiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", type=int, default=8, help="completions in the group")
    parser.add_argument("--completion-tokens", type=int, default=100, help="tokens per completion")
    parser.add_argument("--chunk-tokens", type=int, default=256, help="logit rows per chunk")
    parser.add_argument(
        "--micro-batch-size", type=int, default=0, help="sequences per pass (default: the group)"
    )
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # child process
        print(json.dumps(measure(args.variant, args)))
        return

    results = {}
    for variant in VARIANTS:
        child = [sys.executable, __file__, *sys.argv[1:], "--variant", variant]
        out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
        results[variant] = json.loads(out.strip().splitlines()[-1])
    first = results["chunked"]
    print(
        f"SmolLM2-135M + LoRA r16 (attention), {first['sequences']} sequences, "
        f"{first['sequence_tokens']} tokens ({first['completion_tokens']} completion tokens), "
        f"micro-batch {args.micro_batch_size or args.group}, {torch.get_num_threads()} threads, "
        f"chunk {args.chunk_tokens} rows"
    )
    for variant, r in results.items():
        print(
            f"{variant:12s} step {r['seconds']:6.2f} s   peak RSS {gib(r['peak_rss'])}   "
            f"RSS before the steps {gib(r['rss_before'])}   "
            f"added by the steps {gib(r['peak_rss'] - r['rss_before'])}   "
            f"peak heap added {gib(r['heap_added'])}   "
            f"loss {r['loss']:+.3e}   grad norm {r['grad_norm']:.6f}"
        )
    chunked = results["chunked"]
    for name in ("checkpointed", "naive"):
        other = results[name]
        added = (other["peak_rss"] - other["rss_before"]) / (
            chunked["peak_rss"] - chunked["rss_before"]
        )
        print(
            f"{name} / chunked: time x{other['seconds'] / chunked['seconds']:.2f}, "
            f"peak RSS x{other['peak_rss'] / chunked['peak_rss']:.2f}, RSS added x{added:.2f}, "
            f"heap added x{other['heap_added'] / chunked['heap_added']:.2f}"
        )


if __name__ == "__main__":
    main()
