"""The recompute: teacher-forcing groups' completions through a model, the margin of every token.

The groups of one batch go through the model together, as generation computed them: their
prompts are prefilled once (``node.policy.prefill``: the system line and worked examples they
share computed once), each prompt's key/value cache is repeated to its completions, and the
completions run right-padded on top; the fp32 logits that predict each completion token give its
margin against ``u_t`` and its log-prob (``node.provenance.sampler.pick_checks``). A completion
sampled from that model with those seeds has every margin >= 0 up to float drift; any other has
a position whose margin is below zero by the distance of ``u_t`` to the claimed token's interval.

The model runs in fp32 and eval mode, as the sampler did: a verifier in bf16 would move the
boundaries by up to 0.1 (see the spec) and flag honest peers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from node.policy.generation import preallocated_cache
from node.policy.prefill import prefill, right_padded
from node.provenance.sampler import pick_checks
from node.provenance.seeds import uniforms

_POSITIONS_PER_PASS = 1024
"""Completion positions whose logits one forward pass holds (rows x longest completion)."""


@dataclass(frozen=True)
class CompletionMargins:
    """One completion's margins: the worst (lowest) and where it is."""

    worst: float
    position: int
    margins: tuple[float, ...]
    logprobs: tuple[float, ...] = ()
    """Each token's log-prob under the model (what the sampler's was, up to float drift)."""

    @classmethod
    def of(cls, margins: torch.Tensor, logprobs: torch.Tensor | None = None) -> CompletionMargins:
        position = int(margins.argmin())
        recomputed = () if logprobs is None else tuple(logprobs.tolist())
        return cls(float(margins[position]), position, tuple(margins.tolist()), recomputed)

    def first_below(self, tolerance: float) -> int | None:
        """The first position whose margin is below ``-tolerance`` (the evidence), if any: the
        tokens after a wrong one follow a context the model never sampled, so they fail too."""
        return next((t for t, m in enumerate(self.margins) if m < -tolerance), None)


@dataclass(frozen=True)
class GroupToCheck:
    """One group as the recompute needs it: the prompt the model was fed, the sampled ids of each
    completion (stop token included) and each completion's seed."""

    prompt_ids: Sequence[int]
    completions: Sequence[Sequence[int]]
    seeds: Sequence[bytes]


def group_margins(
    model: PreTrainedModel,
    prompt_ids: Sequence[int],
    completions: Sequence[Sequence[int]],
    seeds: Sequence[bytes],
    *,
    pad_id: int = 0,
) -> list[CompletionMargins]:
    """The margins of each completion's tokens (ids as sampled, stop token included) under
    ``model`` (the active adapter) with the completion's seed."""
    (margins,) = batch_margins(model, [GroupToCheck(prompt_ids, completions, seeds)], pad_id=pad_id)
    return margins


def batch_margins(
    model: PreTrainedModel, groups: Sequence[GroupToCheck], *, pad_id: int = 0
) -> list[list[CompletionMargins]]:
    """:func:`group_margins` of each of ``groups`` (all under the active adapter), computed
    together: their completions in the fewest passes, each prefilling its groups' prompts once."""
    for group in groups:
        if len(group.completions) != len(group.seeds):
            raise ValueError(
                f"{len(group.completions)} completions but {len(group.seeds)} seeds"
            )
        if not group.prompt_ids or any(len(c) == 0 for c in group.completions):
            raise ValueError("the prompt and every completion need at least one token")
    rows = [(i, c) for i, group in enumerate(groups) for c in range(len(group.completions))]
    if not rows:
        return [[] for _ in groups]
    longest = max(len(groups[i].completions[c]) for i, c in rows)
    rows_per_pass = max(1, _POSITIONS_PER_PASS // longest)
    result: list[list[CompletionMargins]] = [[] for _ in groups]
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(rows), rows_per_pass):
                part = rows[start : start + rows_per_pass]
                members = list(dict.fromkeys(i for i, _ in part))  # the groups of this pass
                logits = _teacher_forced_logits(
                    model,
                    [list(groups[i].prompt_ids) for i in members],
                    [members.index(i) for i, _ in part],
                    [groups[i].completions[c] for i, c in part],
                    pad_id,
                )
                for row, (i, c) in enumerate(part):
                    ids, seed = groups[i].completions[c], groups[i].seeds[c]
                    u = torch.tensor(uniforms(seed, len(ids)), dtype=torch.float64)
                    tokens = torch.tensor(list(ids), dtype=torch.long)
                    margins, logprobs = pick_checks(logits[row, : len(ids)].cpu(), tokens, u)
                    result[i].append(CompletionMargins.of(margins, logprobs))
            return result
    finally:
        model.train(was_training)


def _teacher_forced_logits(
    model: PreTrainedModel,
    prompts: list[list[int]],
    prompt_of: list[int],
    completions: Sequence[Sequence[int]],
    pad_id: int,
) -> torch.Tensor:
    """(rows, longest completion, V) fp32 logits predicting each completion position, row r's
    completion continuing ``prompts[prompt_of[r]]``: the prompts prefilled once (as generation
    does), each one's cache shared by its rows."""
    device = next(model.parameters()).device
    longest = max(len(c) for c in completions)
    cache = preallocated_cache(model, max(len(p) for p in prompts) + longest)
    start = prefill(model, prompts, pad_id, cache)
    parent = torch.tensor(prompt_of, dtype=torch.long, device=device)  # (rows,)
    head = model.get_output_embeddings()
    first = head(start.hidden).float()[parent][:, None, :]  # (rows, 1, V)
    if longest == 1:
        return first
    cache.batch_select_indices(parent)
    ids, mask = right_padded([c[:-1] for c in completions], pad_id, device)  # (rows, L - 1)
    positions = start.next_position[parent][:, None] + torch.arange(ids.shape[1], device=device)
    hidden = model.get_decoder()(
        input_ids=ids,
        attention_mask=torch.cat([start.mask[parent], mask], dim=-1),
        position_ids=positions,
        cache=cache,
        use_cache=True,
    )[0]  # (rows, L - 1, H)
    return torch.cat([first, head(hidden).float()], dim=1)
