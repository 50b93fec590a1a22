"""Log-probs of a group's completions with the prompt computed once (GRPO's forward pass).

A GRPO group is one prompt with G completions. Run as G full sequences, the prompt's tokens go
through the model G times; with few-shot prompts of ~140 tokens and answers of ~16 that is most
of the work. Here the prompts of a micro-batch are run once each (``node.policy.prefill``, which
also runs a common prefix of several prompts once, e.g. a preset entry's worked examples), their
key/value cache is repeated to the group's completions, and the completions run on top of it
(right-padded, positions continuing the prompt's). The gradient flows into the prompt's pass
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
from node.policy.prefill import prefill, right_padded


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
    counts = [len(g.completions) for g in groups]
    if routing is not None and adapters is not None:
        routing.set(adapters)

    # -- prompts: one row per group, common prefixes once (node.policy.prefill)
    cache = DynamicCache(config=model.config)
    start = prefill(model, [g.prompt_ids for g in groups], pad_id, cache, routing)

    # -- completions: G rows per group on the group's repeated cache, right-padded
    parent = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor(counts)).to(device)
    cache.batch_select_indices(parent)
    answers = [c for g in groups for c in g.completions]
    out_ids, out_mask = right_padded(answers, pad_id, device)  # (R, L)
    length = out_ids.shape[1]
    if routing is not None and adapters is not None:
        routing.set([adapters[i] for i in parent.tolist()])
    answer_hidden = model.get_decoder()(
        input_ids=out_ids,
        attention_mask=torch.cat([start.mask[parent], out_mask], dim=-1),
        position_ids=start.next_position[parent][:, None] + torch.arange(length, device=device),
        cache=cache,
        use_cache=True,
    )[0]  # (R, L, H)

    # -- position t of a row predicts token t: from the prompt's last token for t = 0
    predicting = torch.cat([start.hidden[parent][:, None], answer_hidden[:, :-1]], dim=1)
    targets = out_mask.bool()  # (R, L)
    return predicting[targets], out_ids[targets]
