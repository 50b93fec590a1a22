"""The seeded sampler ``swarm.sample/1`` (docs/PROTOCOL.md, "Seeded sampler"): picking a token
from fp32 logits and a public uniform ``u``, and the margin by which a claimed token was picked.

For one position, with the model's fp32 logits ``z`` over the whole vocabulary (temperature 1,
no top-p: the protocol fixes both)::

    x_j = float64(z_j) - max_j float64(z_j)
    e_j = exp(x_j)                                   # float64
    C_k = e_0 + ... + e_k                            # float64, vocabulary order
    pick = the first k with C_k > u * C_{V-1}; the last k with e_k > 0 if rounding leaves none

A verifier that recomputes the logits (teacher forcing the completion through the publisher's
model) gets, for each claimed token k, the interval [C_{k-1}, C_k) / C_{V-1} that ``u`` must fall
in, and the **margin** ``min(u - lower, upper - u)``: >= 0 when the token is the pick, < 0 by the
distance to the interval when it is not. Recomputed logits differ from the sampler's by float
rounding (other thread counts, other SIMD kernels, batch padding), so an honest margin may dip
just below zero; a tolerance absorbs that (see the spec's numbers).

Float64 for the cumulative sum: the boundaries it yields move by ~1e-16 between summation
orders, far below the fp32 logits' own drift, so the pick depends on the model, not on how the
sum was vectorised.

``seeded_pick`` also takes a temperature and a top-p for sampling that is never published (a
nucleus keeps the most likely tokens whose mass before them is below ``top_p``; ``u`` then picks
among them in vocabulary order).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_MARGIN_CHUNK = 64
"""Positions per chunk in ``pick_margins`` (a chunk holds 64 x V float64 values)."""


def seeded_pick(
    logits: Tensor, u: Tensor, *, temperature: float = 1.0, top_p: float = 1.0
) -> tuple[Tensor, Tensor]:
    """The token each row of ``logits`` (n, V) picks with its ``u`` (n,), and its log-prob
    under the temperature-scaled distribution before top-p (what GRPO computes): (n,), (n,)."""
    x = _shifted(logits, temperature)  # (n, V)
    weights = x.exp()  # (n, V)
    log_total = weights.sum(-1).log()  # (n,) before the nucleus, for the log-prob
    if top_p < 1:
        weights = _nucleus(weights, top_p)
    cumulative = weights.cumsum(-1)  # (n, V)
    target = u.to(torch.float64)[:, None] * cumulative[:, -1:]  # (n, 1)
    tokens = torch.searchsorted(cumulative, target, right=True).squeeze(-1)  # (n,)
    beyond = tokens >= weights.shape[-1]
    if beyond.any():  # u * C rounded up to C: the last token with weight
        tokens = torch.where(beyond, _last_with_weight(weights), tokens)
    logprobs = x.gather(-1, tokens[:, None]).squeeze(-1) - log_total  # (n,)
    return tokens, logprobs.to(torch.float32)


def pick_margins(logits: Tensor, tokens: Tensor, u: Tensor) -> Tensor:
    """Per position, the margin (float64) by which ``tokens`` (T,) are the picks of ``logits``
    (T, V) with ``u`` (T,): >= 0 for the pick, negative outside its interval."""
    return pick_checks(logits, tokens, u)[0]


def pick_checks(logits: Tensor, tokens: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
    """``pick_margins`` and, from the same pass, each token's log-prob under ``logits``
    (temperature 1, float64): (T,), (T,)."""
    margins, logprobs = [], []
    for start in range(0, logits.shape[0], _MARGIN_CHUNK):
        end = start + _MARGIN_CHUNK
        chunk = _margins(logits[start:end], tokens[start:end], u[start:end])
        margins.append(chunk[0])
        logprobs.append(chunk[1])
    if not margins:
        return torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.float64)
    return torch.cat(margins), torch.cat(logprobs)


def _margins(logits: Tensor, tokens: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
    x = _shifted(logits, 1.0)  # (t, V)
    weights = x.exp()  # (t, V)
    cumulative = weights.cumsum(-1)  # (t, V)
    total = cumulative[:, -1]  # (t,)
    index = tokens.to(torch.long)[:, None]  # (t, 1)
    upper = cumulative.gather(-1, index).squeeze(-1)  # (t,)
    lower = upper - weights.gather(-1, index).squeeze(-1)  # (t,)
    u = u.to(torch.float64)
    margins = torch.minimum(u - lower / total, upper / total - u)
    logprobs = x.gather(-1, index).squeeze(-1) - total.log()  # (t,)
    return torch.nan_to_num(margins, nan=-math.inf), logprobs  # NaN logits pick nothing


def _shifted(logits: Tensor, temperature: float) -> Tensor:
    x = logits.to(torch.float32).to(torch.float64)
    if temperature != 1.0:
        x = x / temperature
    return x - x.amax(-1, keepdim=True)


def _nucleus(weights: Tensor, top_p: float) -> Tensor:
    """``weights`` with the tokens outside the top-p nucleus set to 0 (the top one always stays)."""
    probs = weights / weights.sum(-1, keepdim=True)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    outside_sorted = sorted_probs.cumsum(-1) - sorted_probs >= top_p
    outside = torch.zeros_like(outside_sorted).scatter(-1, order, outside_sorted)
    return weights.masked_fill(outside, 0.0)


def _last_with_weight(weights: Tensor) -> Tensor:
    vocabulary = weights.shape[-1]
    return vocabulary - 1 - (weights.flip(-1) > 0).to(torch.int8).argmax(-1)
