"""Reduced precision for the GRPO update's forward and backward, where the processor has it.

On a CPU with native bfloat16 dot products (Intel AMX, or AVX512-BF16 on Intel Cooper Lake+ and
AMD Zen 4+), bf16 matrix products run at 2.3-4.7x the fp32 rate on the 2-core machines measured
so far (scripts/bench_experiment.py prints both peaks for the machine it runs on). The update then runs the frozen base under ``torch.autocast(bfloat16)``: weights and
activations are rounded to bf16 for the matrix products, while the LoRA parameters, their
gradients, the optimizer, the log-softmax and the loss stay float32.

Sampling never uses it: peers are to recompute a completion's token choices from a seeded
sampler, and fp32 sampling agrees across machines where bf16 re-picks tokens.

``"auto"`` means bf16 where the CPU flags say it is native (read from ``/proc/cpuinfo``:
``amx_bf16`` or ``avx512_bf16``) *and* a bf16 matrix product of the update's size measures at
least ``AUTO_BF16_MIN_SPEEDUP`` times as fast as fp32 on this machine (once per process, ~0.1 s);
float32 elsewhere. The flag alone is not enough: on an Intel Xeon reporting ``avx512_bf16``
without AMX, bf16 products ran at 0.6x fp32 and the update took 1.6x as long (docs/LOG.md).
Autocast is for CPUs only: on other devices the update runs in the model's float32.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from node.config import TrainingPrecision

#: CPU flags (as /proc/cpuinfo names them) of native bf16 matrix instructions.
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


@lru_cache(maxsize=1)
def native_bf16_flag() -> str | None:
    """The first of ``BF16_CPU_FLAGS`` this CPU reports, or None (also where unreadable)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
            break
    return next((flag for flag in BF16_CPU_FLAGS if flag in flags), None)


#: ``auto`` chooses bf16 only where its matrix products measure at least this many times as fast
#: as fp32's: where they merely tie, rounding to bf16 buys nothing. Measured ratios so far are far
#: from it either way (0.6x, 2.3-4.7x, 9x).
AUTO_BF16_MIN_SPEEDUP = 1.2

#: The product timed by ``measured_bf16_speedup``: tokens x hidden times hidden x MLP width of
#: SmolLM2-135M (576, 1536), a typical matrix product of the update.
_PROBE_SHAPE = (1024, 576, 1536)


@lru_cache(maxsize=1)
def measured_bf16_speedup() -> float:
    """fp32's time over bf16's for one ``_PROBE_SHAPE`` matrix product on this CPU, with torch's
    current threads: the best of 5 repetitions of each after a warm-up (bf16 kernels are built
    on first use). Measured once per process."""
    rows, inner, cols = _PROBE_SHAPE
    generator = torch.Generator().manual_seed(0)
    left = torch.randn(rows, inner, generator=generator)
    right = torch.randn(inner, cols, generator=generator)

    def best(dtype: torch.dtype) -> float:
        a, b = left.to(dtype), right.to(dtype)
        torch.matmul(a, b)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - started)
        return min(times)

    return best(torch.float32) / max(best(torch.bfloat16), 1e-9)


def auto_chooses_bf16(flag: str | None, speedup: float) -> bool:
    """``auto``'s rule: a native bf16 flag and a measured speedup of at least
    ``AUTO_BF16_MIN_SPEEDUP``."""
    return flag is not None and speedup >= AUTO_BF16_MIN_SPEEDUP


def _auto_bf16() -> bool:
    flag = native_bf16_flag()
    return flag is not None and auto_chooses_bf16(flag, measured_bf16_speedup())


def resolve_precision(setting: TrainingPrecision, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of the update on ``device``, or None for plain float32."""
    if setting == "float32" or device.type != "cpu":
        return None
    if setting == "bfloat16" or _auto_bf16():
        return torch.bfloat16
    return None


def training_autocast(
    dtype: torch.dtype | None, device: torch.device
) -> contextlib.AbstractContextManager[None]:
    """``torch.autocast`` to ``dtype`` on ``device``, or nothing when ``dtype`` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


#: bf16 copies of frozen linear weights, made once per module (the base never changes).
_COPIES: weakref.WeakKeyDictionary[nn.Module, torch.Tensor] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def frozen_weights_as(dtype: torch.dtype | None, model: nn.Module) -> Iterator[None]:
    """For the block, the frozen linear layers of ``model``'s decoder hold ``dtype`` copies of
    their weights (made on first use and kept: +2 bytes per parameter for bf16). Autocast then
    finds them already cast, instead of casting every weight at every call of every pass; the
    LoRA layers and the output layer are left alone. Nothing happens for ``dtype`` None."""
    if dtype is None:
        yield
        return
    swapped = []
    for name, module in model.get_decoder().named_modules():
        if not isinstance(module, nn.Linear) or "lora_" in name or module.weight.requires_grad:
            continue
        copy = _weight_copy(module, dtype)
        swapped.append((module, module.weight.data))
        module.weight.data = copy
    try:
        yield
    finally:
        for module, original in swapped:
            module.weight.data = original


def frozen_linear_as(
    dtype: torch.dtype | None, linear: nn.Module
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``linear`` (e.g. the output layer, left alone by ``frozen_weights_as``: its weight is tied
    to the input embeddings) as a function holding a ``dtype`` copy of its frozen weight, made
    on first use and kept. Under autocast it computes what ``linear`` would, bit for bit,
    without casting the 28M-entry weight at every call. ``linear`` itself for ``dtype`` None or
    a layer that trains."""
    if dtype is None or not isinstance(linear, nn.Linear) or linear.weight.requires_grad:
        return linear
    weight = _weight_copy(linear, dtype)
    bias = None if linear.bias is None else linear.bias.detach().to(dtype)
    return lambda x: F.linear(x.to(dtype), weight, bias)


def _weight_copy(module: nn.Linear, dtype: torch.dtype) -> torch.Tensor:
    copy = _COPIES.get(module)
    if copy is None or copy.dtype != dtype or copy.shape != module.weight.shape:
        copy = module.weight.detach().to(dtype)
        _COPIES[module] = copy
    return copy


def describe(setting: TrainingPrecision) -> str:
    """One line for logs and benchmarks: what ``setting`` does on this machine, and why."""
    flag = native_bf16_flag()
    if setting == "float32":
        return "float32 (set)"
    if setting == "bfloat16":
        return "bfloat16 autocast (set)" + ("" if flag else ", emulated: this CPU has no bf16 flag")
    if not flag:
        return "float32 (auto: no amx_bf16 or avx512_bf16 flag in /proc/cpuinfo)"
    speedup = measured_bf16_speedup()
    if auto_chooses_bf16(flag, speedup):
        return f"bfloat16 autocast (auto: the CPU reports {flag}, bf16 products {speedup:.1f}x)"
    return f"float32 (auto: the CPU reports {flag}, but bf16 products measured {speedup:.1f}x)"
