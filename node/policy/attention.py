"""The GRPO update's attention on the CPU: eager, without copying keys and values per query head.

transformers' "eager" attention repeats each key/value head for every query head of its group
(``repeat_kv``: SmolLM2 has 9 query heads on 3 key/value heads) before its matrix products, and
its backward pass sums the copies back. Here a group's query heads are stacked along the query
axis instead, ``(B, KV, G * Tq, D)``, so each key/value head enters one product as it is. The
products, mask, softmax (float32) and dtypes are eager's; only the copies are gone.

The GRPO update runs it on the CPU (``grpo.train_together``), where torch's fused attention is
slow in the backward pass. A batched update of 4 SmolLM2 nodes (16 groups of 4) took 7.0 s
with it against 7.8 s with eager's copies (median of 3, same process). It is registered with
transformers under ``GROUPED_EAGER``, with eager's mask.

``training_attention(model, device)`` switches a model from "sdpa" to eager attention for a
block, on the CPU only: to this one for the model types whose own eager attention it reproduces
(``GROUPED_EAGER_MODELS``), to the model's own "eager" for others (softcapping, attention sinks
and the like are theirs); a model set to anything else is left as it is. (Sampling keeps SDPA:
explicit products for its one-token decode steps were faster alone, ~1.2 against ~1.9 ms per
layer, but not within a whole generation.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

GROUPED_EAGER = "swarm_grouped_eager"
#: Model types whose eager attention (transformers 5.x ``eager_attention_forward``, the same
#: function in each) is what ``grouped_eager_attention`` computes.
GROUPED_EAGER_MODELS = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma"})


def grouped_eager_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention of ``query`` (B, H, Tq, D) over ``key``/``value`` (B, KV, Tk, D), H a
    multiple of KV; returns the output (B, Tq, H, D) and the weights (B, H, Tq, Tk)."""
    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    # query head h = kv * group + g reads key/value head kv, as repeat_kv pairs them
    stacked = query.reshape(batch, kv_heads, group * q_len, dim)
    scores = torch.matmul(stacked, key.transpose(2, 3)) * scaling  # (B, KV, G*Tq, Tk)
    scores = scores.view(batch, heads, q_len, -1)  # (B, H, Tq, Tk)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights.view(batch, kv_heads, group * q_len, -1), value)  # (B, KV, G*Tq, D)
    return out.view(batch, heads, q_len, dim).transpose(1, 2).contiguous(), weights


@contextmanager
def training_attention(model: nn.Module, device: torch.device) -> Iterator[None]:
    """``model`` attends eagerly during the block if it is on the CPU with "sdpa"."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    previous = getattr(inner.config, "_attn_implementation", None)
    if device.type != "cpu" or previous != "sdpa":
        yield
        return
    grouped = getattr(inner.config, "model_type", None) in GROUPED_EAGER_MODELS
    inner.set_attn_implementation(GROUPED_EAGER if grouped else "eager")
    try:
        yield
    finally:
        inner.set_attn_implementation(previous)


AttentionInterface.register(GROUPED_EAGER, grouped_eager_attention)
AttentionMaskInterface.register(GROUPED_EAGER, eager_mask)
