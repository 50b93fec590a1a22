"""Prefill with shared prefixes: prompts that begin alike are computed once up to where they part.

Every task prompt of a preset entry starts with the same system message and worked examples
(~120 of ~140 tokens for the shipped presets); only the question differs. ``prefill`` clusters a
batch's prompts by common prefix (per adapter: a prefix's keys and values depend on the adapter
that computed them), runs each cluster's prefix once, repeats its key/value cache to the
cluster's prompts, and runs only their remaining tokens on top (right-padded, positions
continuing the prefix's). The clusters' prefixes are themselves prefilled the same way where they
share a prefix of their own (the system message before different entries' worked examples), so
a tree of prompts runs each of its shared parts once; other prefixes run as one left-padded row
each. The result equals a plain prefill within float rounding (tests check it): the cache, the
last hidden state of each prompt, its mask and its next position, ready for decoding
(generation) or for the completions' pass (GRPO). With gradients on, the gradient flows back
through the cache into every level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from node.policy.adapters import RowAdapters

#: Shortest common prefix worth a cluster of its own.
MIN_SHARED_TOKENS = 16
#: A prompt joins a cluster only if it shares this much of the cluster's current prefix (so a
#: short common system message does not cut a long shared block of worked examples).
JOIN_FRACTION = 0.75


@dataclass(frozen=True)
class Prefilled:
    """What decoding starts from, one row per prompt."""

    cache: DynamicCache
    hidden: torch.Tensor  # (P, H) last hidden state at each prompt's last token
    mask: torch.Tensor  # (P, T) attention mask over the cache's positions
    next_position: torch.Tensor  # (P,) position id of each prompt's first new token


def cluster_prefixes(
    prompts: Sequence[Sequence[int]],
    owners: Sequence[int],
    join_fraction: float = JOIN_FRACTION,
) -> tuple[list[tuple[int, int]], list[int]]:
    """Clusters of prompts of one owner sharing a prefix: each cluster's (a member, prefix
    length), and each prompt's cluster. A prefix leaves every member at least one token; a
    prompt joins a cluster if it shares ``join_fraction`` of its prefix so far."""
    clusters: list[tuple[int, int]] = []
    member_of = [0] * len(prompts)
    for owner in sorted(set(owners)):
        mine = sorted((i for i, o in enumerate(owners) if o == owner), key=lambda i: prompts[i])
        previous = None
        for i in mine:
            limit = len(prompts[i]) - 1
            if previous is not None:
                shared = _common_length(prompts[previous], prompts[i])
                first, length = clusters[-1]
                if shared >= MIN_SHARED_TOKENS and shared >= join_fraction * length:
                    clusters[-1] = (first, min(length, shared, limit))
                    member_of[i] = len(clusters) - 1
                    previous = i
                    continue
            clusters.append((i, limit))
            member_of[i] = len(clusters) - 1
            previous = i
    return clusters, member_of


def prefill(
    model: PreTrainedModel,
    prompts: Sequence[Sequence[int]],
    pad_id: int,
    cache: DynamicCache,
    routing: RowAdapters | None = None,
    owners: Sequence[int] | None = None,
    join_fraction: float = JOIN_FRACTION,
) -> Prefilled:
    """Runs ``prompts`` into ``cache``; with ``routing``, prompt i goes through its routed
    adapter (``routing.names[i]``), and ``owners`` (default: the adapters) tells which prompts
    may share a prefix."""
    device = next(model.parameters()).device
    names = list(routing.names) if routing is not None else [None] * len(prompts)
    if owners is None:
        index = {name: k for k, name in enumerate(dict.fromkeys(names))}
        owners = [index[name] for name in names]
    clusters, member_of = cluster_prefixes(prompts, owners, join_fraction)
    decoder = model.get_decoder()

    # -- level 0: each cluster's prefix once, on what the prefixes share in turn, or left-padded
    heads = [list(prompts[first][:length]) for first, length in clusters]
    mask = _run_heads(
        model, heads, [names[first] for first, _ in clusters],
        [owners[first] for first, _ in clusters], pad_id, cache, routing,
    )  # fmt: skip

    # -- level 1: every prompt's rest on its cluster's cache, right-padded
    parent = torch.tensor(member_of, dtype=torch.long, device=device)  # (P,)
    cache.batch_select_indices(parent)
    tails = [list(p[clusters[c][1] :]) for p, c in zip(prompts, member_of, strict=True)]
    tail_ids, tail_mask = right_padded(tails, pad_id, device)  # (P, T1)
    width = tail_ids.shape[1]
    start = mask.sum(-1)[parent]  # (P,) the prefix's length
    if routing is not None:
        routing.set(names)
    full_mask = torch.cat([mask[parent], tail_mask], dim=-1)  # (P, T0 + T1)
    hidden = decoder(
        input_ids=tail_ids,
        attention_mask=full_mask,
        position_ids=start[:, None] + torch.arange(width, device=device),
        cache=cache,
        use_cache=True,
    )[0]  # (P, T1, H)
    last = tail_mask.sum(-1) - 1  # (P,) index of each prompt's last token in its tail
    final = hidden[torch.arange(len(tails), device=device), last]  # (P, H)
    lengths = start + tail_mask.sum(-1)  # (P,)
    return Prefilled(cache=cache, hidden=final, mask=full_mask, next_position=lengths)


def _run_heads(
    model: PreTrainedModel,
    heads: list[list[int]],
    names: list[str | None],
    owners: list[int],
    pad_id: int,
    cache: DynamicCache,
    routing: RowAdapters | None,
) -> torch.Tensor:
    """Runs the clusters' prefixes into ``cache`` and returns their mask (C, T0). Prefixes that
    share a prefix of their own (an entry's worked examples after a system message every entry
    has) are prefilled with it shared, any share being worth it at this level, so a prompt tree
    runs each of its nodes once; the others run left-padded."""
    device = next(model.parameters()).device
    if _heads_share(heads, owners):
        if routing is not None:
            routing.set(names)
        return prefill(model, heads, pad_id, cache, routing, owners, join_fraction=0.0).mask
    ids, mask = _left_padded(heads, pad_id, device)  # (C, T0)
    if ids.shape[1]:  # all prompts of one token: nothing to share
        if routing is not None:
            routing.set(names)
        model.get_decoder()(
            input_ids=ids,
            attention_mask=mask,
            position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
            cache=cache,
            use_cache=True,
        )
    return mask


def _heads_share(heads: Sequence[Sequence[int]], owners: Sequence[int]) -> bool:
    """Whether clusters' prefixes share prefixes of their own worth a pass (``_run_heads``)."""
    if len(heads) < 2 or min(len(h) for h in heads) <= MIN_SHARED_TOKENS:
        return False
    return len(cluster_prefixes(heads, owners, join_fraction=0.0)[0]) < len(heads)


def tokens_run(
    prompts: Sequence[Sequence[int]], owners: Sequence[int], join_fraction: float = JOIN_FRACTION
) -> int:
    """How many prompt tokens ``prefill`` runs for ``prompts`` (padding not counted): each
    shared part once. For benchmarks' FLOP counts."""
    clusters, member_of = cluster_prefixes(prompts, owners, join_fraction)
    heads = [prompts[first][:length] for first, length in clusters]
    head_owners = [owners[first] for first, _ in clusters]
    tails = sum(len(p) - clusters[c][1] for p, c in zip(prompts, member_of, strict=True))
    if _heads_share(heads, head_owners):
        return tails + tokens_run(heads, head_owners, join_fraction=0.0)
    return tails + sum(len(h) for h in heads)


def right_padded(
    rows: Sequence[Sequence[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (R, T) padded on the right, and their mask; T is at least 1."""
    width = max(1, max(len(r) for r in rows))
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(list(row), dtype=torch.long)
        mask[i, : len(row)] = 1
    return ids.to(device), mask.to(device)


def _left_padded(
    rows: list[list[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
