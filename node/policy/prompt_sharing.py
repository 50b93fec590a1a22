"""Log-probs of a group's completions with the prompt computed once (GRPO's forward pass).

A GRPO group is one prompt with G completions. Run as G full sequences, the prompt's tokens go
through the model G times; with few-shot prompts of ~140 tokens and answers of ~16 that is most
of the work. Here the prompts of a micro-batch are run once (one row per group, left-padded),
their key/value cache is repeated to the group's completions, and the completions run on top of
it (right-padded, positions continuing the prompt's). The gradient flows into the prompt's pass
through the cache, so the result, values and gradients, is that of the full sequences within
float rounding (a test checks it).

The first completion token is predicted from the prompt's last position, every later one from
the completion's previous position. Rows can go through different adapters (``routing``, from
``AdapterPool.rows``): a group's prompt and its completions through the group's adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers import DynamicCache

from node.policy.adapters import RowAdapters


@dataclass(frozen=True)
class TokenizedGroup:
    """One group as token ids: the prompt, each completion, and each completion's advantage."""

    prompt_ids: list[int]
    completions: list[list[int]]
    advantages: list[float]

    @property
    def num_tokens(self) -> int:
        return sum(len(c) for c in self.completions)


def shared_prompt_hidden(
    model: nn.Module,
    groups: Sequence[TokenizedGroup],
    pad_id: int,
    *,
    adapters: Sequence[str | None] | None = None,
    routing: RowAdapters | None = None,
) -> tuple[Tensor, Tensor]:
    """Hidden states (N, H) that predict each completion token, and the tokens (N,).

    N counts every completion token of ``groups``, group by group, completion by completion.
    ``adapters`` names each group's adapter when ``routing`` is given.
    """
    device = next(model.parameters()).device
    decoder = model.get_decoder()
    counts = [len(g.completions) for g in groups]

    # -- prompts: one left-padded row per group; keep the cache and the last position
    width = max(len(g.prompt_ids) for g in groups)
    ids = torch.full((len(groups), width), pad_id, dtype=torch.long)  # (P, T)
    mask = torch.zeros_like(ids)  # (P, T)
    for row, group in enumerate(groups):
        ids[row, width - len(group.prompt_ids) :] = torch.tensor(group.prompt_ids)
        mask[row, width - len(group.prompt_ids) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (P, T)
    if routing is not None and adapters is not None:
        routing.set(adapters)
    cache = DynamicCache(config=model.config)
    prompt_hidden = decoder(
        input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True
    )[0]  # (P, T, H)
    last = prompt_hidden[:, -1]  # (P, H) predicts each completion's first token

    # -- completions: G rows per group on the group's repeated cache, right-padded
    parent = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor(counts))  # (R,)
    cache.batch_select_indices(parent.to(device))
    answers = [c for g in groups for c in g.completions]
    length = max(1, max(len(a) for a in answers))
    out_ids = torch.full((len(answers), length), pad_id, dtype=torch.long)  # (R, L)
    out_mask = torch.zeros_like(out_ids)  # (R, L)
    for row, answer in enumerate(answers):
        out_ids[row, : len(answer)] = torch.tensor(answer, dtype=torch.long)
        out_mask[row, : len(answer)] = 1
    out_ids, out_mask, parent = out_ids.to(device), out_mask.to(device), parent.to(device)
    start = mask.sum(-1)[parent]  # (R,) the prompt's length: the first answer position
    out_positions = start[:, None] + torch.arange(length, device=device)  # (R, L)
    if routing is not None and adapters is not None:
        routing.set([adapters[i] for i in parent.tolist()])
    answer_hidden = decoder(
        input_ids=out_ids,
        attention_mask=torch.cat([mask[parent], out_mask], dim=-1),
        position_ids=out_positions,
        cache=cache,
        use_cache=True,
    )[0]  # (R, L, H)

    # -- position t of a row predicts token t: from the prompt's end for t = 0
    predicting = torch.cat([last[parent][:, None], answer_hidden[:, :-1]], dim=1)  # (R, L, H)
    targets = out_mask.bool()  # (R, L)
    return predicting[targets], out_ids[targets]
