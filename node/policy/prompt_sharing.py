"""Log-probs of a group's completions with the prompt computed once (GRPO's forward pass).

A GRPO group is one prompt with G completions. Run as G full sequences, the prompt's tokens go
through the model G times; with few-shot prompts of ~140 tokens and answers of ~16 that is most
of the work. Here the prompts of a micro-batch are run once each (``node.policy.prefill``, which
also runs a common prefix of several prompts once, e.g. a preset entry's worked examples), their
keys and values are read by the group's completions, which run on top of them (right-padded,
positions continuing the prompt's). The gradient flows into the prompt's pass through its keys
and values, so the result, values and gradients, is that of the full sequences within float
rounding (a test checks it).

With the update's grouped eager attention (``node.policy.attention``, the CPU) and groups of one
size, the completions read each prompt's keys and values in place (``continuing``); otherwise
the prompt's cache is copied to each of its completions (G copies, and their gradients summed
back).

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
from node.policy.attention import GROUPED_EAGER, SharedPrompts, continuing
from node.policy.prefill import Prefilled, prefill, right_padded


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

    # -- completions: G rows per group over the group's prompt, right-padded
    parent = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor(counts)).to(device)
    answers = [c for g in groups for c in g.completions]
    out_ids, out_mask = right_padded(answers, pad_id, device)  # (R, L)
    if routing is not None and adapters is not None:
        routing.set([adapters[i] for i in parent.tolist()])
    answer_hidden = _completions_pass(model, start, parent, counts, out_ids, out_mask)  # (R, L, H)

    # -- position t of a row predicts token t: from the prompt's last token for t = 0
    predicting = torch.cat([start.hidden[parent][:, None], answer_hidden[:, :-1]], dim=1)
    targets = out_mask.bool()  # (R, L)
    return predicting[targets], out_ids[targets]


def _completions_pass(
    model: nn.Module,
    start: Prefilled,
    parent: Tensor,
    counts: list[int],
    out_ids: Tensor,
    out_mask: Tensor,
) -> Tensor:
    length = out_ids.shape[1]
    positions = start.next_position[parent][:, None] + torch.arange(length, device=out_ids.device)
    decoder = model.get_decoder()
    if _reads_in_place(decoder.config, counts, start.mask.shape[1] + length):
        layers = start.cache.layers
        prompts = SharedPrompts(
            keys=[layer.keys for layer in layers],
            values=[layer.values for layer in layers],
            mask=start.mask,
            rows_per_prompt=counts[0],
        )
        with continuing(prompts):
            return decoder(
                input_ids=out_ids, attention_mask=out_mask, position_ids=positions, use_cache=False
            )[0]
    cache = start.cache
    cache.batch_select_indices(parent)
    return decoder(
        input_ids=out_ids,
        attention_mask=torch.cat([start.mask[parent], out_mask], dim=-1),
        position_ids=positions,
        cache=cache,
        use_cache=True,
    )[0]


def _reads_in_place(config: object, counts: list[int], total_length: int) -> bool:
    """Whether the completions can read their prompts' keys and values in place: groups of one
    size, the update's grouped attention, and no sliding window that the sequences outgrow (its
    prompt part is not masked there)."""
    window = getattr(config, "sliding_window", None)
    return (
        len(set(counts)) == 1
        and getattr(config, "_attn_implementation", None) == GROUPED_EAGER
        and (window is None or total_length <= window)
    )
