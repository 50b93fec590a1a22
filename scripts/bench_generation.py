#!/usr/bin/env python
"""Generation throughput: node.policy's batched sampler against a per-prompt ``generate`` loop.

The workload of one round: 8 task prompts of the default preset (three worked examples each,
~140 tokens) x G=8 completions x at most 64 new tokens, temperature 1, on the shipped
SmolLM2-135M. Measured in one run, same prompts and settings:

- loop:     ``model.generate(num_return_sequences=G)`` once per prompt (HF repeats the prompt G
            times and prefills every copy);
- hf-batch: one ``model.generate(num_return_sequences=G)`` over all prompts, left-padded
            (only with ``--hf-batch``: it adds ~50 s);
- batched:  ``node.policy.generation.generate`` (prompt prefilled once, KV cache shared by its G
            completions, finished sequences dropped from the batch).

Tokens are the generated ones up to and including the stop token. Prints seconds and tokens/s for
each, and the ratios; and the batched path's model GFLOP/s as a share of the machine's fp32 GEMM
peak measured in the same run (``bench_experiment.gemm_peak``). Its FLOPs count the useful work
only: 2 x decoder parameters per token run (each prompt's tokens once, a prefix shared by several
prompts once, then every generated token) + 2 x vocabulary x hidden per generated token (the
output layer); attention is not counted. ``--fixed-length`` ignores stop tokens so every path
decodes exactly ``--new-tokens`` per sequence (pure decode speed, no luck in answer lengths).

On a 2-core VM whose other core is busy, torch's two OpenMP threads make small ops wait for the
scheduler (~8 ms each): pass ``--threads 1`` (or set ``OMP_PROC_BIND=true``) there.
Usage: .venv/bin/python scripts/bench_generation.py [--prompts 8] [--group 8] [--new-tokens 64]
       [--fixed-length] [--hf-batch] [--threads N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from bench_experiment import gemm_peak

from node.policy.generation import SamplingConfig, generate_from_ids
from node.policy.model import encode_prompts, load_base, stop_token_ids
from node.policy.prefill import tokens_run
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset
from node.tasks.prompts import build_messages

PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def task_prompts(count: int) -> list[list[dict[str, str]]]:
    preset = get_preset(DEFAULT_PRESET_NAME)
    items = []
    round_seed = 0
    while len(items) < count:
        items += derive_tasks(round_seed.to_bytes(32, "big"), PEER, preset)
        round_seed += 1
    return [build_messages(item) for item in items[:count]]


def generated_tokens(rows: torch.Tensor, stops: list[int]) -> int:
    """Tokens up to and including the first stop token, per row of ``rows`` (N, L)."""
    is_stop = torch.isin(rows, torch.tensor(stops))  # (N, L)
    first = torch.where(is_stop.any(-1), is_stop.int().argmax(-1) + 1, rows.shape[1])  # (N,)
    return int(first.sum())


def hf_generate(
    model, tokenizer, prompts: list[list[int]], group: int, new_tokens: int, stops: list[int]
) -> int:  # type: ignore[no-untyped-def]
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])  # (P, T)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # (P, T)
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens if not stops else 0,
        num_return_sequences=group,
        eos_token_id=stops or None,
        pad_token_id=pad,
    )  # (P * G, T + L)
    return generated_tokens(out[:, width:], stops or [-1])


def useful_flops(model, prompts: list[list[int]], generated: int) -> float:  # type: ignore[no-untyped-def]
    """Model FLOPs of prefilling ``prompts`` (shared prefixes once) and running ``generated``
    tokens through the decoder and the output layer."""
    vocab, hidden = model.get_output_embeddings().weight.shape
    decoder = sum(p.numel() for p in model.get_decoder().parameters()) - vocab * hidden
    prompt = tokens_run(prompts, [0] * len(prompts))
    return 2 * decoder * (prompt + generated) + 2 * vocab * hidden * generated


def timed(label: str, work: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    tokens = work()
    seconds = time.perf_counter() - started
    print(f"{label:9s} {seconds:7.1f} s  {tokens:6d} tokens  {tokens / seconds:7.1f} tokens/s")
    return seconds, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--fixed-length", action="store_true")
    parser.add_argument("--hf-batch", action="store_true", help="also time batched generate")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    base = load_base("smollm2-135m")
    model, tokenizer = base.model, base.tokenizer
    prompts = encode_prompts(tokenizer, task_prompts(args.prompts))
    stops = [] if args.fixed_length else stop_token_ids(tokenizer, model)
    print(
        f"{base.name} on {base.device}, {torch.get_num_threads()} threads: {args.prompts} prompts "
        f"({min(map(len, prompts))}-{max(map(len, prompts))} tokens) x G={args.group} x "
        f"<= {args.new_tokens} new tokens{' (fixed length)' if args.fixed_length else ''}"
    )
    torch.manual_seed(0)

    def ours() -> int:
        sampling = SamplingConfig(max_new_tokens=args.new_tokens, temperature=1.0)
        groups = generate_from_ids(
            model,
            tokenizer,
            prompts,
            num_completions=args.group,
            sampling=sampling,
            seed=0,
            stop_ids=stops,
        )
        return sum(len(c.token_ids) for group in groups for c in group)

    def loop() -> int:
        return sum(
            hf_generate(model, tokenizer, [p], args.group, args.new_tokens, stops) for p in prompts
        )

    hf_generate(model, tokenizer, prompts[:1], 2, 4, stops)  # warm up both paths
    generate_from_ids(
        model, tokenizer, prompts[:1], num_completions=2,
        sampling=SamplingConfig(max_new_tokens=4), seed=1, stop_ids=stops,
    )  # fmt: skip
    loop_s, loop_n = timed("loop", loop)
    if args.hf_batch:
        hf_s, hf_n = timed(
            "hf-batch",
            lambda: hf_generate(model, tokenizer, prompts, args.group, args.new_tokens, stops),
        )
    ours_s, ours_n = timed("batched", ours)
    peak = gemm_peak("float32", torch.get_num_threads())
    rate = useful_flops(model, prompts, ours_n) / ours_s / 1e9
    print(f"batched: {rate:.0f} GFLOP/s = {rate / peak:.0%} of the fp32 GEMM peak measured now "
          f"({peak:.0f} GFLOP/s, 4096x576x1536)")  # fmt: skip
    print(
        f"batched / loop:     {(ours_n / ours_s) / (loop_n / loop_s):.2f}x tokens/s, "
        f"{loop_s / ours_s:.2f}x less time"
    )
    if args.hf_batch:
        print(
            f"batched / hf-batch: {(ours_n / ours_s) / (hf_n / hf_s):.2f}x tokens/s, "
            f"{hf_s / ours_s:.2f}x less time"
        )


if __name__ == "__main__":
    main()
