"""How much a peer's completion weighs in the GRPO update (``node.policy.grpo``): pure functions.

A peer's group was sampled by another policy, so training on it as if on-policy is off-policy
learning. The rules, each chosen in ``GRPOConfig`` (``grpo`` applies them; these are their
numbers):

- a fixed weight per completion (``completion_weights``): ``peer_weight`` for a peer's, 0 for a
  peer's with advantage <= 0 when only positive ones are trained on (``positive_mask``); 1 for own;
- per-token importance weights ``w_t = exp(logp_receiver_t - logp_sender_t)``, truncated at a cap
  (TIS) or zeroed outside ``[1/cap, cap]`` (MIS) (``importance_weights``);
- a group dropped whose mean per-token log-prob is too far below the own completions'
  (``too_unlikely``);
- the Kish effective sample size of the weights, as a fraction of their count (``ess_fraction``).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

PeerImportance = Literal["none", "truncate", "mask"]
PeerAdvantage = Literal["all", "positive"]


def positive_mask(advantages: Tensor) -> Tensor:
    """1.0 where the advantage is > 0, else 0.0 (same shape and dtype)."""
    return (advantages > 0).to(advantages.dtype)


def completion_weights(
    advantages: Tensor, *, peer: bool, peer_weight: float, advantage_rule: PeerAdvantage
) -> Tensor:
    """Fixed weight of each completion (G,) of a group: all 1 for an own group; for a peer's,
    ``peer_weight``, times ``positive_mask`` under the ``"positive"`` rule."""
    if not peer:
        return torch.ones_like(advantages)
    weights = torch.full_like(advantages, peer_weight)
    return weights * positive_mask(advantages) if advantage_rule == "positive" else weights


def importance_weights(
    receiver_logp: Tensor, sender_logp: Tensor, mode: PeerImportance, cap: float
) -> Tensor:
    """Per-token weights (N,), detached: ``w = exp(receiver - sender)``; ``"truncate"``:
    ``min(w, cap)``; ``"mask"``: ``w`` where ``1/cap <= w <= cap``, else 0; ``"none"``: 1.
    A token whose sender log-prob is unknown (NaN) weighs 1."""
    ones = torch.ones_like(receiver_logp, dtype=torch.float32)
    if mode == "none":
        return ones
    ratio = torch.exp(receiver_logp.detach().float() - sender_logp.float())  # NaN where unknown
    if mode == "truncate":
        weights = ratio.clamp(max=cap)
    else:
        inside = (ratio >= 1 / cap) & (ratio <= cap)
        weights = torch.where(inside, ratio, torch.zeros_like(ratio))
    return torch.where(torch.isnan(sender_logp), ones, weights)


def too_unlikely(group_mean: float, reference: float, gap: float) -> bool:
    """Whether a peer's group whose mean per-token log-prob is ``group_mean`` is dropped: it is
    more than ``gap`` nats below ``reference`` (the own completions' mean)."""
    return group_mean < reference - gap


def ess_fraction(weight_sum: float, weight_sq_sum: float, count: int) -> float | None:
    """Kish ESS over ``count``: ``(sum w)^2 / (count * sum w^2)``; None for no weights, 0.0 when
    every weight is 0."""
    if count == 0:
        return None
    if weight_sq_sum == 0:
        return 0.0
    return weight_sum**2 / (count * weight_sq_sum)


def kish_ess(weights: Tensor) -> float | None:
    """``ess_fraction`` of a tensor of weights."""
    w = weights.double()
    return ess_fraction(float(w.sum()), float((w * w).sum()), w.numel())
