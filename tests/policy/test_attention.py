"""The update's grouped eager attention against transformers' eager attention."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoConfig, AutoModelForCausalLM

from node.policy.attention import GROUPED_EAGER, GROUPED_EAGER_MODELS, training_attention


def small_model(model_type: str):  # type: ignore[no-untyped-def]
    """A random two-layer model of ``model_type`` with 4 query heads on 2 key/value heads."""
    config = AutoConfig.for_model(
        model_type,
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(3)
    return AutoModelForCausalLM.from_config(config)


def run(model, implementation: str, ids, mask):  # type: ignore[no-untyped-def]
    """Logits and the input embeddings' gradient of a masked forward with ``implementation``."""
    model.set_attn_implementation(implementation)
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=ids, attention_mask=mask).logits
    (logits * mask[..., None]).square().mean().backward()
    return logits.detach(), model.get_input_embeddings().weight.grad.clone()


@pytest.mark.parametrize("model_type", sorted(GROUPED_EAGER_MODELS))
def test_grouped_eager_attention_equals_eager(model_type: str) -> None:
    model = small_model(model_type)
    ids = torch.randint(0, 97, (3, 11))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding: the mask must reach every query head of a group
    mask[2, :7] = 0
    eager_logits, eager_grad = run(model, "eager", ids, mask)
    logits, grad = run(model, GROUPED_EAGER, ids, mask)
    torch.testing.assert_close(logits, eager_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, eager_grad, rtol=1e-4, atol=1e-7)


def test_training_attention_switches_from_sdpa_on_the_cpu_only() -> None:
    cpu = torch.device("cpu")
    model = small_model("llama")
    model.set_attn_implementation("sdpa")
    with training_attention(model, cpu):
        assert model.config._attn_implementation == GROUPED_EAGER
    assert model.config._attn_implementation == "sdpa"
    with training_attention(model, torch.device("cuda")):  # a GPU keeps its fused kernels
        assert model.config._attn_implementation == "sdpa"
    model.set_attn_implementation("eager")  # a model set to something else is left alone
    with training_attention(model, cpu):
        assert model.config._attn_implementation == "eager"
    # another model type keeps its own eager attention (it may do more: softcapping, sinks)
    other = small_model("phi3")
    other.set_attn_implementation("sdpa")
    with training_attention(other, cpu):
        assert other.config._attn_implementation == "eager"
