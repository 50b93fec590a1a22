"""AdapterPool: many LoRA adapters over one frozen base, one optimizer each."""

from __future__ import annotations

import pytest
import torch

from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings
from node.policy.generation import SamplingConfig, generate
from node.policy.model import BaseModel, encode_prompts, tiny_model

PROMPT = [{"role": "user", "content": "What is 2+3?"}]


@pytest.fixture
def base(tokenizer) -> BaseModel:
    """A fresh tiny model: a pool injects LoRA layers into its base in place."""
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    return BaseModel(name="tiny", model=model, tokenizer=tokenizer)


@pytest.fixture
def pool(base) -> AdapterPool:
    pool = AdapterPool(base)
    pool.add("alice", seed=1)
    pool.add("bob", LoraSettings(rank=4, alpha=8), seed=2)
    return pool


def last_logits(model, tokenizer) -> torch.Tensor:
    ids = torch.tensor(encode_prompts(tokenizer, [PROMPT]))  # (1, T)
    with torch.no_grad():
        return model(input_ids=ids).logits[0, -1]  # (V,)


def perturb(pool: AdapterPool, name: str) -> None:
    with torch.no_grad():
        for key, param in pool.adapter_parameters(name).items():
            if "lora_B" in key:
                param.normal_(0, 0.5)


def test_new_adapters_start_as_the_base_and_diverge_when_one_changes(pool, tokenizer) -> None:
    with pool.reference() as model:
        base = last_logits(model, tokenizer)
    with pool.activate("alice") as model:
        assert torch.allclose(last_logits(model, tokenizer), base)  # LoRA B starts at zero
    perturb(pool, "alice")
    with pool.activate("alice") as model:
        alice = last_logits(model, tokenizer)
    with pool.activate("bob") as model:
        bob = last_logits(model, tokenizer)
    with pool.reference() as model:
        assert torch.equal(last_logits(model, tokenizer), base)
    assert not torch.allclose(alice, bob, atol=1e-3)
    assert torch.allclose(bob, base)


def test_generation_uses_the_active_adapter(pool, tokenizer) -> None:
    greedy = SamplingConfig(max_new_tokens=6, temperature=0)
    with pool.reference() as model:
        before = generate(model, tokenizer, [PROMPT], num_completions=1, sampling=greedy)
    perturb(pool, "alice")
    with pool.activate("alice") as model:
        alice = generate(model, tokenizer, [PROMPT], num_completions=1, sampling=greedy)
    with pool.activate("bob") as model:
        bob = generate(model, tokenizer, [PROMPT], num_completions=1, sampling=greedy)
    assert bob == before
    assert alice != before


def test_the_base_is_shared_frozen_and_gets_no_gradient(base, tokenizer) -> None:
    originals = {name: p.data_ptr() for name, p in base.model.named_parameters()}
    pool = AdapterPool(base)
    pool.add("alice", seed=1)
    pool.add("bob", seed=2)
    assert pool.model.get_base_model() is base.model
    base_params = {
        n.replace("base_model.model.", "", 1).replace(".base_layer", ""): p
        for n, p in pool.model.named_parameters()
        if "lora_" not in n
    }
    assert {n: p.data_ptr() for n, p in base_params.items()} == originals  # same storage
    perturb(pool, "alice")  # so that B's gradient reaches A as well
    with pool.activate("alice") as model:
        model.train()
        ids = torch.tensor(encode_prompts(tokenizer, [PROMPT]))  # (1, T)
        model(input_ids=ids, labels=ids).loss.backward()
        model.eval()
    assert all(not p.requires_grad and p.grad is None for p in base_params.values())
    assert all(p.grad is not None for p in pool.adapter_parameters("alice").values())
    assert all(p.grad is None for p in pool.adapter_parameters("bob").values())


def test_each_optimizer_holds_only_its_adapter(pool) -> None:
    held = {
        name: [id(p) for group in pool.optimizer(name).param_groups for p in group["params"]]
        for name in ("alice", "bob")
    }
    for name in ("alice", "bob"):
        assert held[name] == [id(p) for p in pool.adapter_parameters(name).values()]
    assert not set(held["alice"]) & set(held["bob"])
    assert len(held["alice"]) == 2 * 4 * 2  # A and B, four projections, two layers


def test_a_step_moves_only_the_trained_adapter(pool, tokenizer) -> None:
    perturb(pool, "alice")
    bob_before = pool.adapter_state("bob")
    alice_before = pool.adapter_state("alice")
    with pool.activate("alice") as model:
        ids = torch.tensor(encode_prompts(tokenizer, [PROMPT]))  # (1, T)
        model(input_ids=ids, labels=ids).loss.backward()
        pool.optimizer("alice").step()
    after = pool.adapter_state("alice")
    assert all(not torch.equal(after[k], alice_before[k]) for k in after)
    assert all(torch.equal(v, bob_before[k]) for k, v in pool.adapter_state("bob").items())


def test_settings_shape_the_adapter_and_its_optimizer(base) -> None:
    pool = AdapterPool(base)
    lora = LoraSettings(rank=3, alpha=6, dropout=0.1, target_modules=("q_proj", "v_proj"))
    pool.add("carol", lora, OptimizerSettings(lr=3e-3, weight_decay=0.1))
    params = pool.adapter_parameters("carol")
    assert {k.split(".")[-3] for k in params} == {"q_proj", "v_proj"}
    assert all(p.shape[0] == 3 for k, p in params.items() if "lora_A" in k)
    group = pool.optimizer("carol").param_groups[0]
    assert (group["lr"], group["weight_decay"]) == (3e-3, 0.1)
    assert pool.lora_settings("carol") == lora
    assert LoraSettings.from_dict(lora.to_dict()) == lora


def test_an_adapter_named_like_a_module_keeps_every_key_whole(base) -> None:
    """peft names a weight ``...mlp.up_proj.lora_A.<adapter>.weight``: an adapter called "mlp"
    loses only its own name from the key, never the module path's "mlp"."""
    pool = AdapterPool(base)
    lora = LoraSettings(rank=2, alpha=4, target_modules=("q_proj", "up_proj"))
    pool.add("mlp", lora, seed=1)
    pool.add("other", lora, seed=2)
    mine, theirs = pool.adapter_parameters("mlp"), pool.adapter_parameters("other")
    assert set(mine) == set(theirs)  # the same keys, the adapter's name removed
    assert {k.split(".")[-3] for k in mine} == {"q_proj", "up_proj"}
    assert all(".mlp.up_proj." in k for k in mine if "up_proj" in k)
    assert not any(p is q for p, q in zip(mine.values(), theirs.values()))


def test_activation_is_restored_and_seeds_repeat(base, tokenizer) -> None:
    pool = AdapterPool(base)
    pool.add("alice", seed=5)
    pool.add("bob", seed=5)
    assert pool.model.active_adapter == "alice"
    with pool.activate("bob"):
        assert pool.model.active_adapter == "bob"
    assert pool.model.active_adapter == "alice"
    alice, bob = pool.adapter_state("alice"), pool.adapter_state("bob")
    assert all(torch.equal(alice[k], bob[k]) for k in alice)  # same seed, same init
    assert pool.names == ["alice", "bob"] and "bob" in pool and "carol" not in pool


def test_bad_names_and_settings_are_refused(pool) -> None:
    with pytest.raises(ValueError, match="already exists"):
        pool.add("alice")
    with pytest.raises(ValueError, match="adapter name"):
        pool.add("a.b")
    with pytest.raises(KeyError, match="no adapter 'carol'"):
        with pool.activate("carol"):
            pass
    with pytest.raises(KeyError):
        pool.optimizer("carol")
    for bad in ({"rank": 0}, {"dropout": 1.0}, {"target_modules": ()}):
        with pytest.raises(ValueError):
            LoraSettings(**bad)
    with pytest.raises(ValueError, match="shape"):
        state = pool.adapter_state("bob")
        key = next(iter(state))
        pool.load_adapter_state("bob", {**state, key: torch.zeros(1)})
    with pytest.raises(ValueError, match="missing"):
        pool.load_adapter_state("bob", {})


def test_an_empty_pool_has_a_reference_but_no_model(base) -> None:
    pool = AdapterPool(base)
    with pool.reference() as model:
        assert model is base.model
    with pytest.raises(KeyError):
        pool.model


def test_a_borrowed_adapter_is_the_peer_s_weights_and_leaves_the_pool_as_it_was(
    pool, tokenizer
) -> None:
    perturb(pool, "bob")
    with pool.activate("bob") as model:
        bobs = last_logits(model, tokenizer)
    with pool.activate("alice"):
        with pool.borrowed(LoraSettings(rank=4, alpha=8), pool.adapter_state("bob")) as model:
            assert torch.equal(last_logits(model, tokenizer), bobs)
        assert pool.model.active_adapter == "alice"
    with pytest.raises(ValueError, match="shape"):  # bob's weights under another rank
        with pool.borrowed(LoraSettings(rank=8, alpha=8), pool.adapter_state("bob")):
            pass
    assert sum(n.startswith("borrowed-") for n in pool.names) == 1  # the rank-8 one replaced it


def test_an_adapter_can_be_removed_but_not_while_active(pool) -> None:
    with pool.activate("bob"):
        with pytest.raises(ValueError, match="active"):
            pool.remove("bob")
    pool.remove("bob")
    assert pool.names == ["alice"] and "bob" not in pool
    with pytest.raises(KeyError):
        pool.optimizer("bob")
