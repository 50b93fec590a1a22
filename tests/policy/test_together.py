"""Several nodes' adapters in shared passes: each node gets what it would get alone.

Per-row adapter routing, the shared-prompt GRPO pass, the shared-prefix prefill, joint training
and joint generation, all against the one-node paths, on the tiny model in float32 (bf16 has its
own tolerance tests at the end).
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from transformers import MistralConfig, MistralForCausalLM

from node.interrupt import Interrupted, interruptible
from node.learning_data import ScoredGroup
from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings
from node.policy.attention import GROUPED_EAGER
from node.policy.generation import (
    GenerationRequest,
    SamplingConfig,
    generate_from_ids,
    generate_together,
    preallocated_cache,
)
from node.policy.grpo import (
    GRPOConfig,
    GRPOTrainer,
    TrainShare,
    group_advantages,
    tokenize_group,
    train_together,
)
from node.policy.model import BaseModel, encode_prompts, tiny_model
from node.policy.precision import (
    AUTO_BF16_MIN_SPEEDUP,
    auto_chooses_bf16,
    describe,
    frozen_linear_as,
    measured_bf16_speedup,
    native_bf16_flag,
    resolve_precision,
)
from node.policy.prefill import cluster_prefixes, prefill, tokens_run
from node.policy.prompt_sharing import packs, shared_prompt_hidden
from tests.policy.texts import stopped

NAMES = ("alice", "bob", "carol")
SYSTEM = "You answer with a number between <answer> tags, like <answer>42</answer>. " * 3
QUESTIONS = ["What is 2 + 2?", "What is 3 + 5?", "Name a prime.", "What is 9 - 7?"]


def conversation(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.fixture
def pool(tokenizer) -> AdapterPool:  # type: ignore[no-untyped-def]
    """Three adapters over a fresh tiny Llama, with random (non-zero) LoRA B so each differs."""
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    pool = AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tokenizer))
    draws = torch.Generator().manual_seed(0)  # the same pool whichever tests ran before
    for i, name in enumerate(NAMES):
        pool.add(name, LoraSettings(rank=4, alpha=8), OptimizerSettings(lr=1e-2), seed=i)
        with torch.no_grad():
            for key, param in pool.adapter_parameters(name).items():
                if "lora_B" in key:
                    param.normal_(0, 0.5, generator=draws)
    return pool


def node_groups(tokenizer, node: int) -> list[ScoredGroup]:  # type: ignore[no-untyped-def]
    answers = [" <answer>4</answer>", " 7", " <answer>8</answer> yes", " no idea"]
    rewards = [[1.0, 0.0, 0.5, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]][node % 3]
    return [
        ScoredGroup(
            conversation(q),
            stopped([a * (1 + (k + node) % 2) for k, a in enumerate(answers)]),
            rewards if j % 2 == 0 else list(reversed(rewards)),
        )
        for j, q in enumerate(QUESTIONS[node:] + QUESTIONS[:node])
    ]


def near(a, b, rel: float = 1e-4) -> bool:  # type: ignore[no-untyped-def]
    """Equal within float rounding, relative to the tensor's size."""
    return float((a - b).norm()) <= rel * float(b.norm()) + 1e-7


# ---------------------------------------------------------------- routing


def test_each_row_goes_through_its_own_adapter(pool: AdapterPool, tokenizer) -> None:  # type: ignore[no-untyped-def]
    ids = torch.tensor(encode_prompts(tokenizer, [conversation(QUESTIONS[0])]) * 4)  # (4, T)
    with torch.no_grad():
        alone = {}
        for name in NAMES:
            with pool.activate(name) as model:
                alone[name] = model(input_ids=ids[:1]).logits[0]
        with pool.reference() as model:
            alone[None] = model(input_ids=ids[:1]).logits[0]
        routed = [None, "bob", "alice", "bob"]
        with pool.rows(routed):
            mixed = pool.model(input_ids=ids).logits
    assert not torch.allclose(alone["alice"], alone["bob"], atol=1e-3)  # the adapters differ
    for row, name in enumerate(routed):
        assert torch.allclose(mixed[row], alone[name], atol=1e-5), (row, name)


def test_a_pass_with_gradients_gives_each_row_and_each_adapter_its_own(pool: AdapterPool, tokenizer) -> None:  # type: ignore[no-untyped-def]
    """Recording gradients, the adapters are stacked for all rows at once (not run after run):
    each row's logits and each adapter's gradient are still what that adapter's rows alone
    give."""
    ids = torch.tensor(encode_prompts(tokenizer, [conversation(QUESTIONS[0])]) * 5)  # (5, T)
    routed = ["bob", None, "alice", "alice", "bob"]
    weights = torch.randn(5, ids.shape[1], 8, generator=torch.Generator().manual_seed(1))

    def loss(logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
        return (logits[..., :8] * weights[rows]).sum()

    alone_logits, alone_grads = {}, {}
    for name in ("alice", "bob"):
        rows = [r for r, n in enumerate(routed) if n == name]
        with pool.activate(name) as model:
            logits = model(input_ids=ids[rows]).logits
            loss(logits, rows).backward()
        alone_logits |= {r: logits[k].detach() for k, r in enumerate(rows)}
        alone_grads[name] = {k: p.grad.clone() for k, p in pool.adapter_parameters(name).items()}
        pool.model.zero_grad(set_to_none=True)
    with torch.no_grad(), pool.reference() as model:
        alone_logits[1] = model(input_ids=ids[1:2]).logits[0]
    with pool.rows(routed, trainable=True):
        mixed = pool.model(input_ids=ids).logits
        loss(mixed, list(range(5))).backward()
    for row in range(5):
        assert near(mixed[row].detach(), alone_logits[row], rel=1e-5), row
    for name, grads in alone_grads.items():
        for key, param in pool.adapter_parameters(name).items():
            assert near(param.grad, grads[key], rel=1e-5), (name, key)
    assert all(p.grad is None for p in pool.adapter_parameters("carol").values())


def test_routing_restores_gradients_flags_and_layers(pool: AdapterPool) -> None:
    flags = {n: [p.requires_grad for p in pool.adapter_parameters(n).values()] for n in NAMES}
    with pool.rows(["alice", "bob"], trainable=True):
        assert all(p.requires_grad for p in pool.adapter_parameters("bob").values())
    assert flags == {
        n: [p.requires_grad for p in pool.adapter_parameters(n).values()] for n in NAMES
    }
    assert not any("forward" in vars(m) for m in pool.model.modules())


def test_a_routing_of_the_wrong_length_is_refused(pool: AdapterPool) -> None:
    with pool.rows(["alice"]), pytest.raises(ValueError, match="rows in the batch"):
        pool.model(input_ids=torch.tensor([[1, 2], [3, 4]]))


# ---------------------------------------------------------------- the GRPO pass


@pytest.mark.parametrize(
    ("attention", "packed"),
    [("sdpa", True), ("eager", True), (GROUPED_EAGER, True), (GROUPED_EAGER, False)],
)
def test_shared_prompt_pass_equals_full_sequences(
    pool: AdapterPool, tokenizer, attention, packed
) -> None:  # type: ignore[no-untyped-def]
    groups = [
        tokenize_group(g, group_advantages(torch.tensor(g.rewards)), tokenizer, 16)
        for g in node_groups(tokenizer, 0)
    ]
    with pool.activate("alice") as model:
        model.get_base_model().set_attn_implementation(attention)
        assert packs(model, 1024)  # a group's completions share one row on its cache
        params = pool.adapter_parameters("alice")
        pad = tokenizer.pad_token_id
        shared = _logprobs_and_grads(model, params, groups, pad, shared=True, packed=packed)
        full = _logprobs_and_grads(model, params, groups, pad, shared=False)
    _assert_same(shared, full)


def test_groups_of_different_sizes_leave_empty_slots_that_change_nothing(
    pool: AdapterPool, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    """A packed row has as many slots as the largest group: the others' spare slots are empty."""
    groups = [
        dataclasses.replace(g, completions=g.completions[:k], advantages=g.advantages[:k])
        for g, k in zip(
            [
                tokenize_group(g, group_advantages(torch.tensor(g.rewards)), tokenizer, 16)
                for g in node_groups(tokenizer, 2)
            ],
            [1, 3, 4, 2],
            strict=True,
        )
    ]
    with pool.activate("bob") as model:
        params = pool.adapter_parameters("bob")
        pad = tokenizer.pad_token_id
        shared = _logprobs_and_grads(model, params, groups, pad, shared=True)
        full = _logprobs_and_grads(model, params, groups, pad, shared=False)
    _assert_same(shared, full)


def test_a_sliding_window_model_runs_each_completion_on_its_own_row(tokenizer) -> None:  # type: ignore[no-untyped-def]
    """A window shorter than the sequence keeps only its last keys in the cache, which a packed
    row cannot attend (it would fail): such a model takes the copied-cache path, equal to the full
    sequences, window included. One prompt: with several, the prefill's padding would shift the
    window (an inexactness of sliding-window models in every prefill, not of this pass)."""
    config = MistralConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, sliding_window=12,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = MistralForCausalLM(config)
    groups = [
        tokenize_group(g, group_advantages(torch.tensor(g.rewards)), tokenizer, 16)
        for g in node_groups(tokenizer, 1)[:1]
    ]
    assert not packs(model, len(groups[0].prompt_ids) + 16)
    params = dict(model.named_parameters())
    shared = _logprobs_and_grads(model, params, groups, tokenizer.pad_token_id, shared=True)
    full = _logprobs_and_grads(model, params, groups, tokenizer.pad_token_id, shared=False)
    _assert_same(shared, full)


def _logprobs_and_grads(model, params, groups, pad_id, *, shared: bool, packed: bool = True):  # type: ignore[no-untyped-def]
    """Chosen-token log-probs of ``groups``' completions, their targets, and the gradient of
    their sum for each of ``params``: with the prompts shared, or as full sequences."""
    model.zero_grad(set_to_none=True)
    if shared:
        hidden, targets = shared_prompt_hidden(model, groups, pad_id, packed=packed)
    else:
        sequences = [(g.prompt_ids + c, len(g.prompt_ids)) for g in groups for c in g.completions]
        hidden, targets = _full_hidden(model, sequences, pad_id)
    logits = model.get_output_embeddings()(hidden).log_softmax(-1)
    logp = logits.gather(-1, targets[:, None]).squeeze(-1)
    logp.sum().backward()
    grads = {k: p.grad.clone() for k, p in params.items() if p.grad is not None}
    return logp.detach(), targets, grads


def _assert_same(shared, full) -> None:  # type: ignore[no-untyped-def]
    (shared_logp, shared_targets, shared_grads), (full_logp, full_targets, full_grads) = (
        shared,
        full,
    )
    assert torch.equal(shared_targets, full_targets)
    assert torch.allclose(shared_logp, full_logp, atol=1e-5)
    assert shared_grads.keys() == full_grads.keys() and full_grads
    for key, grad in full_grads.items():
        assert near(shared_grads[key], grad), key


def _full_hidden(model, sequences, pad_id):  # type: ignore[no-untyped-def]
    width = max(len(s) for s, _ in sequences)
    ids = torch.full((len(sequences), width), pad_id)
    mask = torch.zeros_like(ids)
    for row, (seq, _) in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
    hidden = model.get_decoder()(input_ids=ids, attention_mask=mask)[0]
    keep = torch.zeros_like(mask, dtype=torch.bool)
    for row, (seq, prompt) in enumerate(sequences):
        keep[row, prompt : len(seq)] = True
    return hidden[:, :-1][keep[:, 1:]], ids[:, 1:][keep[:, 1:]]


@pytest.mark.parametrize("share_prompts", [True, False])
def test_training_together_equals_training_alone(
    pool: AdapterPool, tokenizer, share_prompts
) -> None:  # type: ignore[no-untyped-def]
    config = GRPOConfig(
        max_completion_tokens=16,
        precision="float32",
        share_prompts=share_prompts,
        micro_batch_size=6,  # groups of different nodes share passes, and are split over them
    )
    start = {n: pool.adapter_state(n) for n in NAMES}
    optimizers = {n: copy.deepcopy(pool.optimizer(n).state_dict()) for n in NAMES}

    alone = {}
    for i, name in enumerate(NAMES):
        with pool.activate(name) as model:
            alone[name] = GRPOTrainer(model, tokenizer, config, pool.optimizer(name)).step(
                node_groups(tokenizer, i)
            )
    after_alone = {n: pool.adapter_state(n) for n in NAMES}

    for name in NAMES:
        pool.load_adapter_state(name, start[name])
        pool.optimizer(name).load_state_dict(optimizers[name])
    shares = [
        TrainShare(node_groups(tokenizer, i), pool.optimizer(n), n) for i, n in enumerate(NAMES)
    ]
    with pool.rows(list(NAMES), trainable=True) as routing:
        together = train_together(pool.model, tokenizer, config, shares, routing=routing)

    for name, metrics in zip(NAMES, together, strict=True):
        reference = alone[name]
        assert metrics.skipped == reference.skipped
        assert metrics.num_tokens == reference.num_tokens
        assert metrics.loss == pytest.approx(reference.loss, rel=1e-4, abs=1e-6)
        assert metrics.grad_norm == pytest.approx(reference.grad_norm, rel=1e-4)
        for key, value in pool.adapter_state(name).items():
            assert near(value, after_alone[name][key]), key
    assert together[2].skipped  # carol's groups have no signal: no update, nothing moved
    assert all(torch.equal(v, start["carol"][k]) for k, v in pool.adapter_state("carol").items())
    assert any(
        not torch.equal(v, start["alice"][k]) for k, v in pool.adapter_state("alice").items()
    )


def test_shares_trained_together_fill_one_pass_each_share_could_fill(
    pool: AdapterPool, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    """micro_batch_size is per share: two shares of 16 completions with micro_batch_size 16 run
    one joint pass (not two passes of 16), and a third share without signal adds nothing."""
    config = GRPOConfig(max_completion_tokens=16, precision="float32", share_prompts=False)
    shares = [
        TrainShare(node_groups(tokenizer, i), pool.optimizer(n), n) for i, n in enumerate(NAMES)
    ]
    assert sum(len(g.completions) for g in shares[0].groups) == config.micro_batch_size
    rows = []
    hook = pool.model.get_decoder().register_forward_hook(
        lambda module, args, kwargs, out: rows.append(kwargs["input_ids"].shape[0]),
        with_kwargs=True,
    )
    try:
        with pool.rows(list(NAMES), trainable=True) as routing:
            train_together(pool.model, tokenizer, config, shares, routing=routing)
    finally:
        hook.remove()
    assert rows == [2 * config.micro_batch_size]


def test_several_shares_need_a_routing(pool: AdapterPool, tokenizer) -> None:  # type: ignore[no-untyped-def]
    config = GRPOConfig(max_completion_tokens=16)
    shares = [
        TrainShare(node_groups(tokenizer, i), pool.optimizer(n), n) for i, n in enumerate(NAMES[:2])
    ]
    with pytest.raises(ValueError, match="routing"):
        train_together(pool.model, tokenizer, config, shares)


# ---------------------------------------------------------------- generation


def test_cluster_prefixes_keeps_long_shared_blocks_and_owners_apart() -> None:
    block = list(range(100, 140))  # 40 shared tokens
    prompts = [block + [1, 2], block + [1, 3], block[:20] + [9] * 30, block + [1, 2], [5]]
    owners = [0, 0, 0, 1, 0]
    clusters, member_of = cluster_prefixes(prompts, owners)
    assert member_of[0] == member_of[1] != member_of[3]  # another owner never shares
    assert clusters[member_of[0]][1] == 41  # block + [1]
    assert member_of[2] != member_of[0]  # 20 shared of 41: not worth cutting the block
    for prompt, cluster in zip(prompts, member_of, strict=True):
        assert clusters[cluster][1] <= len(prompt) - 1  # every member keeps a token to run


def test_prefill_with_shared_prefixes_equals_a_plain_forward(pool: AdapterPool, tokenizer) -> None:  # type: ignore[no-untyped-def]
    prompts = encode_prompts(tokenizer, [conversation(q) for q in QUESTIONS])
    routed = ["alice", "alice", "bob", "bob"]
    with torch.no_grad(), pool.rows(routed) as routing:
        model = pool.model
        width = max(len(p) for p in prompts)
        cache = preallocated_cache(model, width + 4)
        start = prefill(model, prompts, tokenizer.pad_token_id, cache, routing)
    with torch.no_grad():
        for row, (prompt, name) in enumerate(zip(prompts, routed, strict=True)):
            with pool.activate(name) as model:
                alone = model(input_ids=torch.tensor([prompt])).logits[0, -1]
            logits = model.get_output_embeddings()(start.hidden[row])
            assert torch.allclose(logits, alone, atol=1e-4), row
            assert int(start.next_position[row]) == len(prompt)


def test_prompts_that_form_a_tree_run_each_shared_part_once(pool: AdapterPool, tokenizer) -> None:  # type: ignore[no-untyped-def]
    """A system line every prompt has, then two blocks of examples, then the questions: the
    blocks share the system line in their own pass (3 decoder passes, not 2), and the result is
    a plain forward's."""
    system = encode_prompts(tokenizer, [conversation(QUESTIONS[0])])[0][:40]
    blocks = [list(range(1000, 1060)), list(range(2000, 2070))]
    prompts = [system + blocks[i // 2] + [3000 + i, 3100 + i] for i in range(4)]
    calls = []
    decoder = pool.model.get_decoder()
    hook = decoder.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(1), with_kwargs=True
    )
    try:
        with torch.no_grad(), pool.rows(["carol"] * 4) as routing:
            cache = preallocated_cache(pool.model, 200)
            start = prefill(pool.model, prompts, tokenizer.pad_token_id, cache, routing)
    finally:
        hook.remove()
    assert len(calls) == 3  # the system line, the blocks on it, the questions on them
    assert tokens_run(prompts, [0] * 4) == 40 + 60 + 70 + 4 * 2  # each shared part once
    with torch.no_grad(), pool.activate("carol") as model:
        for row, prompt in enumerate(prompts):
            alone = model(input_ids=torch.tensor([prompt])).logits[0, -1]
            logits = model.get_output_embeddings()(start.hidden[row])
            assert torch.allclose(logits, alone, atol=1e-4), row
            assert int(start.next_position[row]) == len(prompt)


def test_generation_together_samples_what_each_node_samples_alone(
    pool: AdapterPool, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    sampling = SamplingConfig(max_new_tokens=6)
    prompts = {
        n: encode_prompts(tokenizer, [conversation(q) for q in QUESTIONS[i : i + 2]])
        for i, n in enumerate(NAMES)
    }
    alone = {}
    for i, name in enumerate(NAMES):
        with pool.activate(name) as model:
            alone[name] = generate_from_ids(
                model, tokenizer, prompts[name], num_completions=3, sampling=sampling, seed=10 + i
            )
    requests = [GenerationRequest(prompts[n], 10 + i, n) for i, n in enumerate(NAMES)]
    with pool.rows(list(NAMES)) as routing:
        together = generate_together(
            pool.model, tokenizer, requests, num_completions=3, sampling=sampling, routing=routing
        )
    for name, result in zip(NAMES, together, strict=True):
        assert [[c.token_ids for c in group] for group in result] == [
            [c.token_ids for c in group] for group in alone[name]
        ]
    assert alone["alice"] != alone["bob"]


# ---------------------------------------------------------------- bf16 autocast


def test_precision_settings() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_precision("float32", cpu) is None
    assert resolve_precision("bfloat16", cpu) is torch.bfloat16
    assert resolve_precision("auto", cuda) is None  # autocast is chosen for CPUs only
    assert "float32" in describe("float32")


def test_auto_takes_bf16_only_where_the_flag_and_the_measurement_agree() -> None:
    # the flag alone misled on a Xeon with avx512_bf16 and no AMX: bf16 products at 0.6x fp32
    assert not auto_chooses_bf16("avx512_bf16", 0.6)
    assert not auto_chooses_bf16(None, 9.0)  # no native bf16: emulated, whatever was timed
    assert auto_chooses_bf16("amx_bf16", 5.0)
    assert auto_chooses_bf16("avx512_bf16", AUTO_BF16_MIN_SPEEDUP)
    assert not auto_chooses_bf16("avx512_bf16", AUTO_BF16_MIN_SPEEDUP * 0.99)


def test_auto_on_this_machine_follows_its_measurement() -> None:
    speedup = measured_bf16_speedup()
    assert 0 < speedup < float("inf") and measured_bf16_speedup() == speedup  # measured once
    chosen = resolve_precision("auto", torch.device("cpu"))
    expected = auto_chooses_bf16(native_bf16_flag(), speedup)
    assert chosen is (torch.bfloat16 if expected else None)
    assert describe("auto").startswith("bfloat16" if expected else "float32")


def test_the_output_layers_bf16_copy_computes_what_autocast_would(pool: AdapterPool) -> None:
    head = pool.model.get_output_embeddings()
    hidden = torch.randn(5, head.in_features)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = head(hidden)
        copied = frozen_linear_as(torch.bfloat16, head)
        assert torch.equal(copied(hidden), expected) and expected.dtype == torch.bfloat16
    assert frozen_linear_as(None, head) is head


def test_bf16_update_stays_close_to_float32(pool: AdapterPool, tokenizer) -> None:  # type: ignore[no-untyped-def]
    """The bf16 step's loss and gradient norm within 5 % of fp32's."""
    start, state = pool.adapter_state("alice"), copy.deepcopy(pool.optimizer("alice").state_dict())
    results = {}
    for precision in ("float32", "bfloat16"):
        pool.load_adapter_state("alice", start)
        pool.optimizer("alice").load_state_dict(state)
        config = GRPOConfig(max_completion_tokens=16, precision=precision)
        with pool.activate("alice") as model:
            results[precision] = GRPOTrainer(
                model, tokenizer, config, pool.optimizer("alice")
            ).step(node_groups(tokenizer, 0))
    fp32, bf16 = results["float32"], results["bfloat16"]
    assert bf16.num_tokens == fp32.num_tokens and not bf16.skipped
    assert bf16.loss == pytest.approx(fp32.loss, rel=0.05, abs=0.01)
    assert bf16.grad_norm == pytest.approx(fp32.grad_norm, rel=0.05)


def test_a_stop_during_an_update_leaves_the_adapters_as_they_were(
    pool: AdapterPool, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    """A Ctrl-C between micro-batches ends the update before any optimizer step."""
    config = GRPOConfig(max_completion_tokens=16, precision="float32", micro_batch_size=2)
    start = {n: pool.adapter_state(n) for n in NAMES}
    shares = [
        TrainShare(node_groups(tokenizer, i), pool.optimizer(n), n) for i, n in enumerate(NAMES)
    ]
    checks = [0]

    def stop_at_the_second_micro_batch() -> bool:
        checks[0] += 1
        return checks[0] >= 2

    with (
        interruptible(stop_at_the_second_micro_batch),
        pytest.raises(Interrupted),
        pool.rows(list(NAMES), trainable=True) as routing,
    ):
        train_together(pool.model, tokenizer, config, shares, routing=routing)
    assert checks[0] == 2
    for name in NAMES:
        assert all(torch.equal(v, start[name][k]) for k, v in pool.adapter_state(name).items())
