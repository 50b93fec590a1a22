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

**Rows that continue shared prompts** (``continuing``): in the update's completions pass every
prompt has G completions. Rather than copying the prompt's keys and values G times into a cache
(and summing the copies' gradients back), the pass runs the completions without a cache and
this attention reads the prompts' keys and values where they are: a prompt's G completions are
stacked along the query axis, so each prompt key/value head enters one product, as above. The
scores over the prompt and over the completion's own tokens share one softmax, as eager's do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

GROUPED_EAGER = "swarm_grouped_eager"
#: Model types whose eager attention (transformers 5.x ``eager_attention_forward``, the same
#: function in each) is what ``grouped_eager_attention`` computes.
GROUPED_EAGER_MODELS = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma"})


@dataclass(frozen=True)
class SharedPrompts:
    """Prompts that a pass's rows continue, ``rows_per_prompt`` rows each, prompt by prompt."""

    keys: Sequence[torch.Tensor]  # per layer (P, KV, Tp, D), after the position rotation
    values: Sequence[torch.Tensor]  # per layer (P, KV, Tp, D)
    mask: torch.Tensor  # (P, Tp) 1 where a prompt has a token
    rows_per_prompt: int


_CONTINUING: ContextVar[SharedPrompts | None] = ContextVar("continuing", default=None)


@contextmanager
def continuing(prompts: SharedPrompts) -> Iterator[None]:
    """``grouped_eager_attention`` reads ``prompts`` as every row's past during the block (the
    model run without a cache, positions continuing each prompt's)."""
    token = _CONTINUING.set(prompts)
    try:
        yield
    finally:
        _CONTINUING.reset(token)


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
    prompts = _CONTINUING.get()
    if prompts is not None:
        return _continuing_attention(
            module, prompts, query, key, value, attention_mask, scaling, dropout
        )
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


def _continuing_attention(
    module: nn.Module,
    prompts: SharedPrompts,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float,
) -> tuple[torch.Tensor, None]:
    """Rows r = p * G + g over prompt p's keys/values and their own (causal) ones."""
    rows, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    past_keys, past_values = prompts.keys[module.layer_idx], prompts.values[module.layer_idx]
    count, _, past_len, _ = past_keys.shape
    per = prompts.rows_per_prompt
    if count * per != rows:
        raise ValueError(f"{rows} rows do not continue {count} prompts of {per} rows each")
    # (P, KV, group, G, Tq, D): query head h = kv * group + j, row r = p * G + g
    stacked = query.view(count, per, kv_heads, group, q_len, dim).permute(0, 2, 3, 1, 4, 5)
    past = torch.matmul(stacked.reshape(count, kv_heads, -1, dim), past_keys.transpose(2, 3))
    past = past.view(count, kv_heads, group, per, q_len, past_len) * scaling
    past = past.masked_fill(~prompts.mask.bool()[:, None, None, None, None], _lowest(past))
    own_keys = key.view(count, per, kv_heads, q_len, dim).permute(0, 2, 1, 4, 3)[:, :, None]
    own = torch.matmul(stacked, own_keys) * scaling  # (P, KV, group, G, Tq, Tq)
    if attention_mask is None:
        causal = torch.ones(q_len, q_len, dtype=torch.bool, device=query.device).tril()
        own = own.masked_fill(~causal, _lowest(own))
    else:
        own = own + attention_mask.view(count, per, q_len, q_len)[:, None, None]
    scores = torch.cat([past, own], dim=-1)
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    on_past, on_own = weights.split([past_len, q_len], dim=-1)
    out = torch.matmul(on_past.reshape(count, kv_heads, -1, past_len), past_values)
    own_values = value.view(count, per, kv_heads, q_len, dim).transpose(1, 2)[:, :, None]
    out = out.view_as(stacked) + torch.matmul(on_own, own_values)  # (P, KV, group, G, Tq, D)
    return out.permute(0, 3, 4, 1, 2, 5).reshape(rows, q_len, heads, dim), None


def _lowest(scores: torch.Tensor) -> float:
    return torch.finfo(scores.dtype).min


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
