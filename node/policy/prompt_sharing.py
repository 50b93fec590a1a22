"""Log-probs of a group's completions with the prompt computed once (GRPO's forward pass).

A GRPO group is one prompt with G completions. Run as G full sequences, the prompt's tokens go
through the model G times; with few-shot prompts of ~140 tokens and answers of ~16 that is most
of the work. Here the prompts of a micro-batch are run once each (``node.policy.prefill``, which
also runs a common prefix of several prompts once, e.g. a preset entry's worked examples), and
the completions run on top of their prompt's key/value cache, positions continuing the prompt's.
A group's G completions go side by side in one row on its prompt's cache, each attending the
prompt and its own earlier tokens only (a prepared 4D mask), so the cache is not copied G times;
where attention takes no prepared mask or a sliding window would apply (``packs``), each
completion gets a row of its own on a copy of the cache. The gradient flows into the prompt's
pass through the cache, so the result, values and gradients, is that of the full sequences
within float rounding (tests check both ways).

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
from node.policy.attention import GROUPED_EAGER
from node.policy.prefill import Prefilled, prefill, right_padded

#: Attention implementations that take a prepared 4D mask as it is (``packs``).
PREPARED_MASK_ATTENTION = ("eager", "sdpa", GROUPED_EAGER)


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
    packed: bool = True,
) -> tuple[Tensor, Tensor]:
    """Hidden states (N, H) that predict each completion token, and the tokens (N,).

    N counts every completion token of ``groups``, group by group, completion by completion.
    ``adapters`` names each group's adapter when ``routing`` is given. ``packed=False`` (or a
    model ``packs`` refuses) runs each completion on its own copy of its prompt's cache.
    """
    device = next(model.parameters()).device
    counts = [len(g.completions) for g in groups]
    if routing is not None and adapters is not None:
        routing.set(adapters)

    # -- prompts: one row per group, common prefixes once (node.policy.prefill)
    cache = DynamicCache(config=model.config)
    start = prefill(model, [g.prompt_ids for g in groups], pad_id, cache, routing)

    # -- completions: each group's G on top of its prompt's cache
    answers = [c for g in groups for c in g.completions]
    out_ids, out_mask = right_padded(answers, pad_id, device)  # (R, L)
    parent = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor(counts)).to(device)
    if packed and packs(model, start.mask.shape[1] + out_ids.shape[1]):
        if routing is not None and adapters is not None:
            routing.set(adapters)  # one row per group
        answer_hidden = _packed_pass(model, out_ids, out_mask, start, parent)
    else:
        if routing is not None and adapters is not None:
            routing.set([adapters[i] for i in parent.tolist()])  # one row per completion
        answer_hidden = _copied_pass(model, out_ids, out_mask, start, parent)

    # -- position t of a row predicts token t: from the prompt's last token for t = 0
    predicting = torch.cat([start.hidden[parent][:, None], answer_hidden[:, :-1]], dim=1)
    targets = out_mask.bool()  # (R, L)
    return predicting[targets], out_ids[targets]


def packs(model: nn.Module, longest: int) -> bool:
    """Whether a group's completions can share one row on its cache (``_packed_pass``): the row's
    mask is a prepared 4D one, which transformers passes to eager and SDPA attention as it is.
    Not where attention takes no such mask (flash attention), nor where a sliding window shorter
    than ``longest`` (prompt + completion tokens) applies: the cache then keeps only the window's
    last keys, and a prepared mask would skip the window."""
    config = model.config
    if getattr(config, "_attn_implementation", "eager") not in PREPARED_MASK_ATTENTION:
        return False
    window = getattr(config, "sliding_window", None)
    return not (isinstance(window, int) and window < longest)


def _packed_pass(
    model: nn.Module, out_ids: Tensor, out_mask: Tensor, start: Prefilled, parent: Tensor
) -> Tensor:
    """Hidden states (R, L, H) of the completions, a group's side by side in one row."""
    packed = _PackedCompletions.of(out_ids, out_mask, start.mask, parent)
    hidden = model.get_decoder()(
        input_ids=packed.ids,
        attention_mask=packed.attention_bias(start.hidden.dtype),
        position_ids=start.next_position[:, None] + packed.offsets,
        cache=start.cache,
        use_cache=True,
    )[0]  # (P, W * L, H)
    groups, length = start.mask.shape[0], out_ids.shape[1]
    return hidden.view(groups, -1, length, hidden.shape[-1])[parent, packed.slot]


def _copied_pass(
    model: nn.Module, out_ids: Tensor, out_mask: Tensor, start: Prefilled, parent: Tensor
) -> Tensor:
    """Hidden states (R, L, H) of the completions, one row each on a copy of its prompt's
    cache (right-padded, positions continuing the prompt's)."""
    start.cache.batch_select_indices(parent)
    length = out_ids.shape[1]
    return model.get_decoder()(
        input_ids=out_ids,
        attention_mask=torch.cat([start.mask[parent], out_mask], dim=-1),
        position_ids=start.next_position[parent][:, None]
        + torch.arange(length, device=out_ids.device),
        cache=start.cache,
        use_cache=True,
    )[0]


@dataclass(frozen=True)
class _PackedCompletions:
    """Each group's completions side by side in one row of W slots of L tokens (W: the most
    completions of a group), each slot attending the group's prompt (in the cache) and its own
    earlier tokens only: the row equals G separate rows on G copies of the prompt's cache."""

    ids: Tensor  # (P, W * L)
    offsets: Tensor  # (P, W * L): each token's place in its completion, 0..L-1
    allowed: Tensor  # (P, W * L, T + W * L) bool: which cache and row positions a token sees
    slot: Tensor  # (R,) each completion's slot in its group's row

    @staticmethod
    def of(
        out_ids: Tensor, out_mask: Tensor, prompt_mask: Tensor, parent: Tensor
    ) -> _PackedCompletions:
        """``out_ids``/``out_mask`` (R, L): the completions, right-padded; ``prompt_mask``
        (P, T): each group's cache positions; ``parent`` (R,): each completion's group."""
        groups, length = prompt_mask.shape[0], out_ids.shape[1]
        counts = torch.bincount(parent, minlength=groups)
        first = torch.cumsum(counts, 0) - counts  # each group's first completion
        slot = torch.arange(len(parent), device=parent.device) - first[parent]
        width = int(counts.max())
        ids = out_ids.new_zeros((groups, width, length))  # an empty slot's tokens are never read
        valid = torch.zeros((groups, width, length), dtype=torch.bool, device=out_ids.device)
        ids[parent, slot] = out_ids
        valid[parent, slot] = out_mask.bool()
        span = width * length
        place = torch.arange(span, device=out_ids.device)
        same_slot = (place[:, None] // length) == (place[None, :] // length)
        causal = place[None, :] <= place[:, None]
        own = same_slot & causal & valid.view(groups, 1, span)  # (P, span, span)
        sees_prompt = prompt_mask.bool()[:, None, :].expand(-1, span, -1)  # (P, span, T)
        return _PackedCompletions(
            ids=ids.view(groups, span),
            offsets=(place % length).expand(groups, -1),
            allowed=torch.cat([sees_prompt, own], dim=-1),
            slot=slot,
        )

    def attention_bias(self, dtype: torch.dtype) -> Tensor:
        """The mask as an additive (P, 1, W * L, T + W * L) bias, as eager attention and SDPA
        take a prepared one: 0 where seen, the dtype's lowest value elsewhere."""
        bias = torch.zeros(self.allowed.shape, dtype=dtype, device=self.allowed.device)
        return bias.masked_fill(~self.allowed, torch.finfo(dtype).min)[:, None]
