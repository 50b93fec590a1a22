"""Checkpoints: round trip, atomic replacement, refusal of foreign or damaged checkpoints."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from peft import PeftModel
from transformers import LlamaConfig, LlamaForCausalLM

import node.policy.checkpoint as checkpoint
from node.policy.adapters import AdapterPool, LoraSettings
from node.policy.checkpoint import (
    load_checkpoint,
    read_checkpoint,
    rewind_checkpoint,
    save_checkpoint,
)
from node.policy.errors import CheckpointError
from node.policy.model import BaseModel, encode_prompts, tiny_model

PROMPT = [{"role": "user", "content": "What is 2+3?"}]


def fresh_pool(tokenizer, name: str = "tiny", adapter: str | None = "alice") -> AdapterPool:
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    pool = AdapterPool(BaseModel(name=name, model=model, tokenizer=tokenizer))
    if adapter:
        pool.add(adapter, LoraSettings(rank=4, alpha=8), seed=1)
    return pool


def train_step(pool: AdapterPool, name: str = "alice") -> None:
    ids = torch.tensor(encode_prompts(pool.base.tokenizer, [PROMPT]))  # (1, T)
    with pool.activate(name) as model:
        pool.optimizer(name).zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        pool.optimizer(name).step()


def next_random_numbers() -> tuple[float, torch.Tensor, np.ndarray]:
    return random.random(), torch.rand(3), np.random.rand(3)


def optimizer_tensors(pool: AdapterPool, name: str = "alice") -> list[torch.Tensor]:
    state = pool.optimizer(name).state_dict()["state"]
    return [t.clone() for index in sorted(state) for t in state[index].values()]


@pytest.fixture
def pool(tokenizer) -> AdapterPool:
    pool = fresh_pool(tokenizer)
    train_step(pool)
    train_step(pool)
    return pool


def test_no_checkpoint_yet_is_none(tmp_path, pool) -> None:
    assert load_checkpoint(tmp_path / "missing", pool, "alice") is None
    assert load_checkpoint(tmp_path, pool, "alice") is None
    assert read_checkpoint(tmp_path) is None


def test_round_trip_restores_weights_optimizer_and_rng_streams(tmp_path, pool) -> None:
    random.seed(1), torch.manual_seed(1), np.random.seed(1)
    save_checkpoint(tmp_path, pool, "alice", round=7, meta={"published": [6, 7]})
    weights, moments = pool.adapter_state("alice"), optimizer_tensors(pool)
    expected = next_random_numbers()

    train_step(pool)  # mutate everything
    next_random_numbers()
    info = load_checkpoint(tmp_path, pool, "alice")

    assert info is not None and (info.round, info.meta) == (7, {"published": [6, 7]})
    assert (info.base_model, info.adapter, info.lora) == ("tiny", "alice", LoraSettings(4, 8))
    restored = pool.adapter_state("alice")
    assert all(torch.equal(restored[k], v) for k, v in weights.items())
    assert all(torch.equal(a, b) for a, b in zip(optimizer_tensors(pool), moments, strict=True))
    got = next_random_numbers()
    assert got[0] == expected[0]
    assert torch.equal(got[1], expected[1])
    assert np.array_equal(got[2], expected[2])


def test_a_restarted_node_gets_its_adapter_back_and_trains_on_identically(tmp_path, pool) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=3)
    restarted = fresh_pool(pool.base.tokenizer, adapter=None)
    assert load_checkpoint(tmp_path, restarted, "alice", restore_rng=False) is not None
    assert restarted.lora_settings("alice") == LoraSettings(rank=4, alpha=8)
    train_step(pool)
    train_step(restarted)
    ours, theirs = pool.adapter_state("alice"), restarted.adapter_state("alice")
    assert all(torch.allclose(ours[k], theirs[k], atol=1e-7) for k in ours)


def test_a_newer_save_replaces_the_older_and_leaves_one_snapshot(tmp_path, pool) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    latest = save_checkpoint(tmp_path, pool, "alice", round=2)
    assert read_checkpoint(tmp_path).round == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["CURRENT", latest.name])


def snapshot_rounds(directory: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in directory.iterdir() if p.name[:6] == "round-")


def test_keep_previous_keeps_the_snapshot_that_was_current_and_no_older(tmp_path, pool) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    save_checkpoint(tmp_path, pool, "alice", round=2, keep_previous=True)
    assert snapshot_rounds(tmp_path) == [1, 2] and read_checkpoint(tmp_path).round == 2
    save_checkpoint(tmp_path, pool, "alice", round=3, keep_previous=True)
    assert snapshot_rounds(tmp_path) == [2, 3] and read_checkpoint(tmp_path).round == 3


def test_rewind_makes_an_earlier_round_current_and_removes_later_ones(tmp_path, pool) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    weights = pool.adapter_state("alice")
    train_step(pool)
    save_checkpoint(tmp_path, pool, "alice", round=2, keep_previous=True)
    orphan = tmp_path / "round-00000003-deadbeef"  # killed after the rename, before CURRENT
    orphan.mkdir()

    assert rewind_checkpoint(tmp_path, 7) is None  # no such round: nothing changes
    assert read_checkpoint(tmp_path).round == 2 and orphan.exists()

    info = rewind_checkpoint(tmp_path, 1)
    assert info is not None and info.round == 1
    assert read_checkpoint(tmp_path) == info and snapshot_rounds(tmp_path) == [1]
    assert load_checkpoint(tmp_path, pool, "alice").round == 1
    assert all(torch.equal(pool.adapter_state("alice")[k], v) for k, v in weights.items())
    assert rewind_checkpoint(tmp_path, 1) == info  # already there


def test_rewind_skips_a_damaged_snapshot_and_refuses_an_ambiguous_one(tmp_path, pool) -> None:
    first = save_checkpoint(tmp_path, pool, "alice", round=1)
    latest = save_checkpoint(tmp_path, pool, "alice", round=2, keep_previous=True)
    (latest / "optimizer.pt").write_bytes(b"damaged")
    assert rewind_checkpoint(tmp_path, 2) is None  # the only snapshot of round 2 is damaged
    twin = tmp_path / "round-00000001-0badcafe"
    shutil.copytree(first, twin)
    with pytest.raises(CheckpointError, match="several snapshots of round 1"):
        rewind_checkpoint(tmp_path, 1)  # neither is current: which one is meant?
    assert (tmp_path / "CURRENT").read_text().strip() == latest.name  # nothing changed


def test_a_failure_mid_write_keeps_the_previous_checkpoint(tmp_path, pool, monkeypatch) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    weights = pool.adapter_state("alice")
    train_step(pool)

    def crash() -> dict:
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "_rng_state", crash)  # after adapter and optimizer files
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, pool, "alice", round=2)
    assert [p.name for p in tmp_path.iterdir() if p.name != "CURRENT"] == [
        read_checkpoint(tmp_path).path.name
    ]  # the staging folder is gone
    assert load_checkpoint(tmp_path, pool, "alice").round == 1
    assert all(torch.equal(pool.adapter_state("alice")[k], v) for k, v in weights.items())


def test_leftovers_of_a_killed_save_are_ignored_then_swept(tmp_path, pool) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    staging = tmp_path / ".staging-killed"  # killed while writing files
    staging.mkdir()
    (staging / "adapter_model.safetensors").write_bytes(b"\0" * 10)
    orphan = tmp_path / "round-00000002-deadbeef"  # killed after the rename, before CURRENT
    orphan.mkdir()
    assert load_checkpoint(tmp_path, pool, "alice").round == 1
    latest = save_checkpoint(tmp_path, pool, "alice", round=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["CURRENT", latest.name])


def test_a_checkpoint_of_another_base_model_is_refused(tmp_path, pool) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    other = fresh_pool(pool.base.tokenizer, name="HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(CheckpointError, match="trained on base model 'tiny'.*SmolLM2"):
        load_checkpoint(tmp_path, other, "alice")


def test_a_checkpoint_whose_shapes_do_not_fit_is_refused(tmp_path, pool) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    config = LlamaConfig(
        vocab_size=len(pool.base.tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    narrow = LlamaForCausalLM(config).eval().requires_grad_(False)
    same_name = AdapterPool(BaseModel(name="tiny", model=narrow, tokenizer=pool.base.tokenizer))
    with pytest.raises(CheckpointError, match="does not fit this model.*shape"):
        load_checkpoint(tmp_path, same_name, "alice")


def test_other_lora_settings_are_refused(tmp_path, pool, tokenizer) -> None:
    save_checkpoint(tmp_path, pool, "alice", round=1)
    other = fresh_pool(tokenizer, adapter=None)
    other.add("alice", LoraSettings(rank=8))
    with pytest.raises(CheckpointError, match="configure the same LoRA settings"):
        load_checkpoint(tmp_path, other, "alice")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda s: _flip_byte(s / "adapter_model.safetensors"), "checksum"),
        (lambda s: (s / "optimizer.pt").unlink(), "optimizer.pt is missing"),
        (lambda s: (s / "checkpoint.json").write_text("{not json"), "unreadable"),
        (lambda s: (s / "checkpoint.json").unlink(), "incomplete snapshot"),
        (lambda s: _edit_manifest(s, format="swarm.policy-checkpoint/99"), "format"),
        (lambda s: (s.parent / "CURRENT").write_text("round-00000009-00000000"), "damaged"),
    ],
)
def test_a_damaged_checkpoint_gives_a_clear_error(tmp_path, pool, damage, message) -> None:
    snapshot = save_checkpoint(tmp_path, pool, "alice", round=1)
    weights = pool.adapter_state("alice")
    damage(snapshot)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tmp_path, pool, "alice")
    assert all(torch.equal(pool.adapter_state("alice")[k], v) for k, v in weights.items())


def test_bad_save_arguments_are_refused_before_writing(tmp_path, pool) -> None:
    with pytest.raises(ValueError, match="round"):
        save_checkpoint(tmp_path, pool, "alice", round=-1)
    with pytest.raises(TypeError):
        save_checkpoint(tmp_path, pool, "alice", round=1, meta={"x": object()})
    with pytest.raises(KeyError):
        save_checkpoint(tmp_path, pool, "bob", round=1)
    assert load_checkpoint(tmp_path, pool, "alice") is None


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated")
def test_a_snapshot_opens_with_peft_alone(tmp_path, pool, tokenizer) -> None:
    snapshot = save_checkpoint(tmp_path, pool, "alice", round=1)
    model = PeftModel.from_pretrained(tiny_model(tokenizer, seed=0), str(snapshot))
    ids = torch.tensor(encode_prompts(tokenizer, [PROMPT]))  # (1, T)
    with torch.no_grad(), pool.activate("alice") as ours:
        assert torch.allclose(model(input_ids=ids).logits, ours(input_ids=ids).logits, atol=1e-5)


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _edit_manifest(snapshot: Path, **changes: object) -> None:
    path = snapshot / "checkpoint.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
