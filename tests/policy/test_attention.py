"""The update's grouped eager attention against transformers' eager attention, and rows that
continue shared prompts against rows on copies of the prompts' caches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

from node.policy.attention import (
    GROUPED_EAGER,
    GROUPED_EAGER_MODELS,
    SharedPrompts,
    continuing,
    training_attention,
)


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


@pytest.mark.parametrize("model_type", sorted(GROUPED_EAGER_MODELS))
def test_rows_continuing_shared_prompts_equal_rows_on_copied_caches(model_type: str) -> None:
    """Completions reading their prompt's keys and values in place (``continuing``) get the
    logits and gradients of completions run on a copy of the prompt's cache."""
    model = small_model(model_type)
    model.set_attn_implementation(GROUPED_EAGER)
    decoder = model.get_decoder()
    prompts = torch.randint(3, 97, (2, 7))
    prompt_mask = torch.ones_like(prompts)
    prompt_mask[1, :3] = 0  # left padding in the prompts
    completions = torch.randint(3, 97, (6, 5))  # 3 completions per prompt
    completion_mask = torch.ones_like(completions)
    completion_mask[4, 2:] = 0  # right padding in the completions
    parent = torch.arange(2).repeat_interleave(3)
    positions = prompt_mask.sum(-1)[parent][:, None] + torch.arange(5)

    def completions_logits(in_place: bool):  # type: ignore[no-untyped-def]
        model.zero_grad(set_to_none=True)
        cache = DynamicCache(config=model.config)
        prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        decoder(prompts, attention_mask=prompt_mask, position_ids=prompt_positions, cache=cache)
        if in_place:
            shared = SharedPrompts(
                keys=[layer.keys for layer in cache.layers],
                values=[layer.values for layer in cache.layers],
                mask=prompt_mask,
                rows_per_prompt=3,
            )
            with continuing(shared):
                out = model(completions, attention_mask=completion_mask, position_ids=positions)
        else:
            cache.batch_select_indices(parent)
            mask = torch.cat([prompt_mask[parent], completion_mask], dim=-1)
            out = model(completions, attention_mask=mask, position_ids=positions, cache=cache)
        logits = out.logits * completion_mask[..., None]
        logits.square().mean().backward()  # reaches the prompts' pass through their keys/values
        return logits.detach(), model.get_input_embeddings().weight.grad.clone()

    copied_logits, copied_grad = completions_logits(in_place=False)
    logits, grad = completions_logits(in_place=True)
    torch.testing.assert_close(logits, copied_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, copied_grad, rtol=1e-4, atol=1e-7)


def test_rows_that_do_not_match_the_shared_prompts_are_refused() -> None:
    model = small_model("llama")
    model.set_attn_implementation(GROUPED_EAGER)
    cache = DynamicCache(config=model.config)
    model.get_decoder()(torch.randint(3, 97, (2, 4)), cache=cache)
    shared = SharedPrompts(
        keys=[layer.keys for layer in cache.layers],
        values=[layer.values for layer in cache.layers],
        mask=torch.ones(2, 4, dtype=torch.long),
        rows_per_prompt=3,
    )
    with continuing(shared), pytest.raises(ValueError, match="5 rows do not continue 2 prompts"):
        model(torch.randint(3, 97, (5, 2)), position_ids=torch.arange(4, 6).expand(5, 2))
