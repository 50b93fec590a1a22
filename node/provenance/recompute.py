"""The recompute: teacher-forcing a group's completions through a model, the margin of every token.

For one group (one prompt, its completions and their seeds) the prompt is prefilled once and its
key/value cache shared by the completions, right-padded and run through the model together, as
generation computed them; the fp32 logits that predict each completion token
give its margin against ``u_t`` (``node.provenance.sampler.pick_margins``). A completion sampled
from that model with those seeds has every margin >= 0 up to float drift; any other has a
position whose margin is below zero by the distance of ``u_t`` to the claimed token's interval.

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
from node.provenance.sampler import pick_margins
from node.provenance.seeds import uniforms

_POSITIONS_PER_PASS = 1024
"""Completion positions whose logits one forward pass holds (rows x longest completion)."""


@dataclass(frozen=True)
class CompletionMargins:
    """One completion's margins: the worst (lowest) and where it is."""

    worst: float
    position: int
    margins: tuple[float, ...]

    @classmethod
    def of(cls, margins: torch.Tensor) -> CompletionMargins:
        position = int(margins.argmin())
        return cls(float(margins[position]), position, tuple(margins.tolist()))

    def first_below(self, tolerance: float) -> int | None:
        """The first position whose margin is below ``-tolerance`` (the evidence), if any: the
        tokens after a wrong one follow a context the model never sampled, so they fail too."""
        return next((t for t, m in enumerate(self.margins) if m < -tolerance), None)


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
    if len(completions) != len(seeds):
        raise ValueError(f"{len(completions)} completions but {len(seeds)} seeds")
    if not prompt_ids or any(len(c) == 0 for c in completions):
        raise ValueError("the prompt and every completion need at least one token")
    longest = max(len(c) for c in completions)
    rows_per_pass = max(1, _POSITIONS_PER_PASS // longest)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            result = []
            for start in range(0, len(completions), rows_per_pass):
                part = completions[start : start + rows_per_pass]
                logits = _teacher_forced_logits(model, list(prompt_ids), part, pad_id)
                for row, (ids, seed) in enumerate(zip(part, seeds[start:], strict=False)):
                    u = torch.tensor(uniforms(seed, len(ids)), dtype=torch.float64)
                    tokens = torch.tensor(list(ids), dtype=torch.long)
                    margins = pick_margins(logits[row, : len(ids)].cpu(), tokens, u)
                    result.append(CompletionMargins.of(margins))
            return result
    finally:
        model.train(was_training)


def _teacher_forced_logits(
    model: PreTrainedModel, prompt: list[int], completions: Sequence[Sequence[int]], pad_id: int
) -> torch.Tensor:
    """(rows, longest completion, V) fp32 logits predicting each completion position: the
    prompt prefilled once (as generation does), its cache shared by the rows."""
    device = next(model.parameters()).device
    rows, longest = len(completions), max(len(c) for c in completions)
    cache = preallocated_cache(model, len(prompt) + longest)
    start = prefill(model, [prompt], pad_id, cache)
    head = model.get_output_embeddings()
    first = head(start.hidden).float()[:, None, :].expand(rows, 1, -1)  # (rows, 1, V)
    if longest == 1:
        return first
    cache.batch_repeat_interleave(rows)
    ids, mask = right_padded([c[:-1] for c in completions], pad_id, device)  # (rows, L - 1)
    hidden = model.get_decoder()(
        input_ids=ids,
        attention_mask=torch.cat([start.mask.expand(rows, -1), mask], dim=-1),
        position_ids=start.next_position[:, None] + torch.arange(ids.shape[1], device=device),
        cache=cache,
        use_cache=True,
    )[0]  # (rows, L - 1, H)
    return torch.cat([first, head(hidden).float()], dim=1)
