"""The update's grouped eager attention against transformers' eager attention."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from node.policy.attention import GROUPED_EAGER, attention
from node.policy.model import tiny_model


def run(model, implementation: str, ids, mask):  # type: ignore[no-untyped-def]
    """Logits and the input embeddings' gradient of a masked forward with ``implementation``."""
    model.set_attn_implementation(implementation)
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=ids, attention_mask=mask).logits
    (logits * mask[..., None]).square().mean().backward()
    return logits.detach(), model.get_input_embeddings().weight.grad.clone()


def test_grouped_eager_attention_equals_eager(tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = tiny_model(tokenizer, seed=3)
    assert model.config.num_attention_heads > model.config.num_key_value_heads  # grouped
    ids = torch.randint(0, len(tokenizer), (3, 11))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding: the mask must reach every query head of a group
    mask[2, :7] = 0
    eager_logits, eager_grad = run(model, "eager", ids, mask)
    logits, grad = run(model, GROUPED_EAGER, ids, mask)
    torch.testing.assert_close(logits, eager_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, eager_grad, rtol=1e-4, atol=1e-7)


def test_attention_switches_from_sdpa_on_the_cpu_only(tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = tiny_model(tokenizer, seed=4)
    model.set_attn_implementation("sdpa")
    with attention(model, GROUPED_EAGER, torch.device("cpu")):
        assert model.config._attn_implementation == GROUPED_EAGER
    assert model.config._attn_implementation == "sdpa"
    with attention(model, GROUPED_EAGER, torch.device("cuda")):  # a GPU keeps its fused kernels
        assert model.config._attn_implementation == "sdpa"
    model.set_attn_implementation("eager")  # a model set to something else is left alone
    with attention(model, GROUPED_EAGER, torch.device("cpu")):
        assert model.config._attn_implementation == "eager"
