"""Weighting rules for peers' groups in the GRPO update: the weights each rule gives (pure
functions, exact values) and the gradient it leaves (the trainer's against a gradient computed
here from its formula: ``-sum(coefficient_t * logp_t) / divisor``, the surrogate's at ratio 1).

The tiny model's base has its final norm scaled up, so its next-token distribution is peaked:
its own samples are then far more likely under it than random ids (about 3 against 13 nats a
token), as a policy's are after some training.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from pydantic import ValidationError  # noqa: E402

from node.learning_data import GeneratedCompletion, ScoredGroup  # noqa: E402
from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings  # noqa: E402
from node.policy.generation import SamplingConfig, generate_from_ids  # noqa: E402
from node.policy.grpo import (  # noqa: E402
    GRPOConfig,
    GRPOTrainer,
    TokenizedCompletion,
    TrainShare,
    collate,
    completion_logprobs,
    group_advantages,
    train_together,
    trainable_parameters,
)
from node.policy.model import BaseModel, encode_prompts, tiny_model  # noqa: E402
from node.policy.peer_weights import (  # noqa: E402
    completion_weights,
    ess_fraction,
    importance_weights,
    kish_ess,
    positive_mask,
    too_unlikely,
)

LENGTH = 6  # completion tokens of every completion here
REWARDS = [1.0, 0.0, 1.0, 0.0]  # advantages +-0.5 / (0.5 + 1e-4)
CPU = torch.device("cpu")


# ---------------------------------------------------------------- pure functions


def test_positive_mask_and_completion_weights() -> None:
    advantages = torch.tensor([1.0, -1.0, 0.0, 0.5])
    assert torch.equal(positive_mask(advantages), torch.tensor([1.0, 0.0, 0.0, 1.0]))
    own = completion_weights(advantages, peer=False, peer_weight=0.5, advantage_rule="positive")
    assert torch.equal(own, torch.ones(4))
    peer_all = completion_weights(advantages, peer=True, peer_weight=0.5, advantage_rule="all")
    assert torch.equal(peer_all, torch.full((4,), 0.5))
    positive = completion_weights(advantages, peer=True, peer_weight=0.5, advantage_rule="positive")
    assert torch.equal(positive, torch.tensor([0.5, 0.0, 0.0, 0.5]))


def test_importance_weights_truncate_and_mask() -> None:
    receiver = torch.zeros(5)
    # w = exp(receiver - sender) = 4, 1.5, 1, 1/4, and unknown (NaN sender)
    sender = torch.tensor([-math.log(4), -math.log(1.5), 0.0, math.log(4), math.nan])
    truncated = importance_weights(receiver, sender, "truncate", 2.0)
    assert torch.allclose(truncated, torch.tensor([2.0, 1.5, 1.0, 0.25, 1.0]), rtol=1e-6)
    masked = importance_weights(receiver, sender, "mask", 2.0)
    assert torch.allclose(masked, torch.tensor([0.0, 1.5, 1.0, 0.0, 1.0]), rtol=1e-6)
    assert torch.equal(importance_weights(receiver, sender, "none", 2.0), torch.ones(5))
    # a ratio inside [1/cap, cap] on both sides is kept by the mask
    both_sides = torch.tensor([math.log(2.5), -math.log(2.5)])
    inside = importance_weights(torch.zeros(2), both_sides, "mask", 3.0)
    assert torch.allclose(inside, torch.tensor([0.4, 2.5]), rtol=1e-6)
    assert not importance_weights(receiver.requires_grad_(), sender, "mask", 2.0).requires_grad


def test_gap_decision() -> None:
    assert too_unlikely(-10.0, -3.0, 5.0)
    assert not too_unlikely(-7.0, -3.0, 5.0)
    assert not too_unlikely(-2.0, -3.0, 0.1)  # more likely than the own ones: kept


def test_kish_ess() -> None:
    assert kish_ess(torch.ones(7)) == pytest.approx(1.0)
    assert kish_ess(torch.full((3,), 0.5)) == pytest.approx(1.0)
    assert kish_ess(torch.tensor([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)
    assert kish_ess(torch.tensor([2.0, 1.0, 1.0])) == pytest.approx(16 / 18)
    assert kish_ess(torch.zeros(3)) == 0.0
    assert kish_ess(torch.zeros(0)) is None
    assert ess_fraction(0.0, 0.0, 0) is None


@pytest.mark.parametrize(
    "field",
    [
        {"peer_weight": 0.0},
        {"peer_weight": 1.5},
        {"peer_logprob_gap": 0.0},
        {"peer_importance_cap": 1.0},
        {"peer_importance": "clip"},
        {"peer_advantage": "negative"},
    ],
)
def test_invalid_settings_are_refused(field: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError):
        GRPOConfig(max_completion_tokens=8, **field)


# ---------------------------------------------------------------- the update on the tiny model


@pytest.fixture
def pool(tokenizer) -> AdapterPool:  # type: ignore[no-untyped-def]
    """alice's and bob's adapters (random B, so A has gradients too) over a peaked tiny Llama."""
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    with torch.no_grad():
        model.model.norm.weight.mul_(12.0)
    pool = AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tokenizer))
    gen = torch.Generator().manual_seed(3)
    for seed, name in enumerate(("alice", "bob")):
        pool.add(name, LoraSettings(rank=4, alpha=8), OptimizerSettings(lr=1e-3), seed=seed)
        with torch.no_grad():
            for key, param in pool.adapter_parameters(name).items():
                if "lora_B" in key:
                    param.copy_(torch.randn(param.shape, generator=gen) * 0.02)
    return pool


@pytest.fixture
def policy(pool: AdapterPool):  # type: ignore[no-untyped-def]
    """The peft model with alice's adapter active."""
    with pool.activate("alice") as active:
        yield active


def prompt(tokenizer, question: str) -> list[int]:  # type: ignore[no-untyped-def]
    return encode_prompts(tokenizer, [[{"role": "user", "content": question}]])[0]


def sampled(policy, tokenizer, prompt_ids: list[int], seed: int) -> list[GeneratedCompletion]:  # type: ignore[no-untyped-def]
    """Four of the policy's own samples of ``LENGTH`` tokens, with their log-probs."""
    sampling = SamplingConfig(max_new_tokens=LENGTH)
    (group,) = generate_from_ids(
        policy, tokenizer, [prompt_ids], num_completions=4, sampling=sampling, seed=seed,
        stop_ids=[],
    )
    assert all(len(c.token_ids) == LENGTH and c.logprobs is not None for c in group)
    return group


def random_ids(tokenizer, seed: int) -> list[GeneratedCompletion]:  # type: ignore[no-untyped-def]
    gen = torch.Generator().manual_seed(seed)
    draws = [torch.randint(0, len(tokenizer), (LENGTH,), generator=gen) for _ in range(4)]
    return [completion(ids.tolist()) for ids in draws]


def completion(ids: list[int], logprobs: list[float] | None = None) -> GeneratedCompletion:
    known = None if logprobs is None else tuple(logprobs)
    return GeneratedCompletion("", tuple(ids), "length", known)


def relabelled(group: list[GeneratedCompletion], prompt_ids: list[int]) -> ScoredGroup:
    return ScoredGroup(prompt_ids, group, REWARDS, origin="peer")


#: Every peer rule off (the update before them); each test turns on the rules it tests.
NO_RULES = {"peers_only_steps": True, "peer_logprob_gap": None, "peer_importance": "none"}


def trainer(policy, tokenizer, lr: float = 0.0, **config) -> GRPOTrainer:  # type: ignore[no-untyped-def]
    """A trainer whose step leaves the gradient in ``.grad`` (SGD at lr 0, no clipping), with
    the peer rules in ``config`` only."""
    optimizer = torch.optim.SGD(trainable_parameters(policy), lr=lr)
    settings = GRPOConfig(
        max_completion_tokens=LENGTH, precision="float32", max_grad_norm=1e9, **(NO_RULES | config)
    )
    return GRPOTrainer(policy, tokenizer, settings, optimizer)


def grads(policy) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    return {n: p.grad.clone() for n, p in policy.named_parameters() if p.requires_grad}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], rel: float = 1e-4) -> bool:
    assert a.keys() == b.keys()
    return all(float((a[n] - b[n]).norm()) <= rel * float(b[n].norm()) + 1e-9 for n in a)


def formula_grads(policy, terms, divisor: int) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    """Gradient of ``-sum_t coefficient_t * logp_t / divisor`` over ``terms``: (prompt ids,
    completion ids, per-token coefficients) -- the GRPO loss's at ratio 1 (one iteration)."""
    for p in trainable_parameters(policy):
        p.grad = None
    total = torch.zeros(())
    for prompt_ids, ids, coefficients in terms:
        batch = collate([TokenizedCompletion(prompt_ids + ids, len(prompt_ids), 0.0)], 0, CPU)
        logp = completion_logprobs(policy, batch, chunk_tokens=256)
        total = total - (torch.as_tensor(coefficients, dtype=torch.float32) * logp).sum()
    (total / divisor).backward()
    return grads(policy)


def terms_of(group: ScoredGroup, scale: list[float] | None = None) -> list:  # type: ignore[type-arg]
    """Each completion of ``group`` with coefficient advantage x ``scale`` (1 if not given)."""
    advantages = group_advantages(torch.tensor(group.rewards)).tolist()
    scale = scale or [1.0] * len(advantages)
    return [
        (list(group.prompt), list(c.token_ids), [a * s] * len(c.token_ids))
        for c, a, s in zip(group.completions, advantages, scale, strict=True)
    ]


def receiver_logprobs(policy, prompt_ids: list[int], ids: list[int]) -> list[float]:  # type: ignore[no-untyped-def]
    batch = collate([TokenizedCompletion(prompt_ids + ids, len(prompt_ids), 0.0)], 0, CPU)
    with torch.no_grad():
        return completion_logprobs(policy, batch, chunk_tokens=256).tolist()


@pytest.fixture
def setting(policy, tokenizer):  # type: ignore[no-untyped-def]
    """An own group of the policy's samples, and prompt ids for peers' groups."""
    own_prompt, peer_prompt = prompt(tokenizer, "What is 2 + 2?"), prompt(tokenizer, "Say hi.")
    own = ScoredGroup(own_prompt, sampled(policy, tokenizer, own_prompt, seed=1), REWARDS)
    return own, peer_prompt


def test_peer_weight_scales_the_gradient(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    _, peer_prompt = setting
    peer = relabelled(random_ids(tokenizer, 0), peer_prompt)
    full = trainer(policy, tokenizer).step([peer])
    full_grads = grads(policy)
    half = trainer(policy, tokenizer, peer_weight=0.5).step([peer])
    half_grads = grads(policy)
    for name, grad in full_grads.items():
        assert torch.allclose(half_grads[name], 0.5 * grad, rtol=1e-6, atol=0), name
    assert half.loss == pytest.approx(0.5 * full.loss, rel=1e-6)
    assert half.num_tokens == full.num_tokens == 4 * LENGTH
    assert half.kind == full.kind == "peers" and half.peer_ess == pytest.approx(1.0)
    assert same(half_grads, formula_grads(policy, terms_of(peer, [0.5] * 4), 4 * LENGTH))


def test_without_peers_only_steps_a_peers_only_share_does_not_step(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    peer = relabelled(random_ids(tokenizer, 0), peer_prompt)
    flat_own = ScoredGroup(own.prompt, own.completions, [1.0] * 4)  # no signal
    step = trainer(policy, tokenizer, lr=1e-2, peers_only_steps=False)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    metrics = step.step([flat_own, peer])
    assert metrics.skipped and metrics.kind == "none" and metrics.num_tokens == 0
    assert all(torch.equal(before[n], p.detach()) for n, p in policy.named_parameters())
    mixed = step.step([own, peer])
    assert not mixed.skipped and mixed.kind == "mixed" and mixed.num_groups == 2
    assert any(not torch.equal(before[n], p.detach()) for n, p in policy.named_parameters())
    # with the default, the same peers-only share steps on the peers' group
    assert trainer(policy, tokenizer).step([flat_own, peer]).kind == "peers"


def test_step_kinds(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    peer = relabelled(random_ids(tokenizer, 0), peer_prompt)
    step = trainer(policy, tokenizer)
    assert step.step([own]).kind == "own"
    assert step.step([own, peer]).kind == "mixed"
    assert step.step([peer]).kind == "peers"
    assert step.step([ScoredGroup(own.prompt, own.completions, [0.0] * 4)]).kind == "none"
    alone = step.step([own])
    assert alone.peer_logprob_gap is None and alone.peer_ess is None


def test_gap_metric_is_positive_for_random_peers(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    random_peer = relabelled(random_ids(tokenizer, 0), peer_prompt)
    metrics = trainer(policy, tokenizer).step([own, random_peer])
    assert metrics.peer_logprob_gap is not None and metrics.peer_logprob_gap > 5.0
    own_again = relabelled(list(own.completions), own.prompt)  # the same ids as a peer's
    metrics = trainer(policy, tokenizer).step([own, own_again])
    assert metrics.peer_logprob_gap == pytest.approx(0.0, abs=1e-4)


def test_gap_rule_drops_an_unlikely_peer_group_and_keeps_a_likely_one(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    unlikely = relabelled(random_ids(tokenizer, 0), peer_prompt)
    likely = relabelled(sampled(policy, tokenizer, peer_prompt, seed=2), peer_prompt)
    gap = trainer(policy, tokenizer, peer_logprob_gap=5.0)

    metrics = gap.step([own, unlikely])
    dropped_grads = grads(policy)
    assert metrics.peer_groups_dropped == 1 and metrics.kind == "own"
    assert metrics.num_groups == 1 and metrics.num_tokens == 4 * LENGTH
    assert metrics.peer_logprob_gap is None and metrics.peer_ess is None
    alone = trainer(policy, tokenizer).step([own])
    assert metrics.loss == pytest.approx(alone.loss, rel=1e-6)
    # the dropped group's rows ran in the update's pass: equal to float rounding
    assert same(dropped_grads, grads(policy), rel=1e-5)

    kept = gap.step([own, likely, unlikely])
    assert kept.peer_groups_dropped == 1 and kept.kind == "mixed" and kept.num_groups == 2
    assert kept.peer_logprob_gap is not None and abs(kept.peer_logprob_gap) < 5.0


def test_gap_rule_falls_back_to_the_sampler_log_probs(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    flat_own = ScoredGroup(own.prompt, own.completions, [1.0] * 4)  # no signal, its log-probs known
    unlikely = relabelled(random_ids(tokenizer, 0), peer_prompt)
    gap = trainer(policy, tokenizer, peer_logprob_gap=5.0)
    metrics = gap.step([flat_own, unlikely])
    assert metrics.peer_groups_dropped == 1 and metrics.skipped and metrics.kind == "none"
    # own completions without sampler log-probs: no reference, the peers' group is kept
    no_logprobs = [completion(list(c.token_ids)) for c in own.completions]
    kept = gap.step([ScoredGroup(own.prompt, no_logprobs, [1.0] * 4), unlikely])
    assert kept.peer_groups_dropped == 0 and kept.kind == "peers"


def embedding_calls(policy) -> list[int]:  # type: ignore[no-untyped-def]
    """A counter of the passes through ``policy``'s input embeddings, as they happen."""
    calls = [0]

    def count(*_: object) -> None:
        calls[0] += 1

    policy.get_input_embeddings().register_forward_hook(count)
    return calls


def test_the_gap_rule_judges_the_update_passes_and_costs_no_pass(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    """In one iteration the gap rule judges the update's own log-probs, pass by pass, and adds
    no pass: in one pass or in one pass per group (the own group given last), it drops the
    unlikely group and leaves the gradient of the other two."""
    own, peer_prompt = setting
    unlikely = relabelled(random_ids(tokenizer, 0), peer_prompt)
    likely = relabelled(sampled(policy, tokenizer, peer_prompt, seed=2), peer_prompt)
    calls = embedding_calls(policy)
    expected = formula_grads(policy, terms_of(own) + terms_of(likely), 8 * LENGTH)
    results = []
    for size, groups in ((16, [own, unlikely, likely]), (4, [unlikely, likely, own])):
        before = calls[0]
        trainer(policy, tokenizer, micro_batch_size=size).step(groups)
        off_calls, before = calls[0] - before, calls[0]
        metrics = trainer(policy, tokenizer, micro_batch_size=size, peer_logprob_gap=5.0).step(
            groups
        )
        assert calls[0] - before == off_calls  # the rule costs no pass
        assert metrics.peer_groups_dropped == 1 and metrics.num_groups == 2
        assert metrics.num_tokens == 8 * LENGTH and metrics.kind == "mixed"
        assert same(grads(policy), expected)
        results.append(metrics)
    one, split = results
    assert split.loss == pytest.approx(one.loss, rel=1e-5)
    assert split.peer_logprob_gap == pytest.approx(one.peer_logprob_gap, rel=1e-5)


def test_the_gap_rule_runs_its_own_pass_under_dropout(tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    """With dropout active, a training pass is not what the rule measures (an evaluation pass):
    the rule runs a pass of its own, and still drops the unlikely group."""
    own, peer_prompt = setting
    unlikely = relabelled(random_ids(tokenizer, 0), peer_prompt)
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    with torch.no_grad():
        model.model.norm.weight.mul_(12.0)
    pool = AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tokenizer))
    pool.add("carol", LoraSettings(rank=4, alpha=8, dropout=0.5), OptimizerSettings(), seed=0)
    with pool.activate("carol") as active:
        calls = embedding_calls(active)
        off = trainer(active, tokenizer).step([own, unlikely])
        off_calls = calls[0]
        on = trainer(active, tokenizer, peer_logprob_gap=5.0).step([own, unlikely])
    assert off.peer_groups_dropped == 0 and on.peer_groups_dropped == 1
    assert calls[0] - off_calls > off_calls


def test_the_gap_rule_runs_its_own_pass_over_several_iterations(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    """From the second iteration the update's passes are no longer the policy the rule holds
    peers to: the rule judges in a pass of its own, before the update."""
    own, peer_prompt = setting
    unlikely = relabelled(random_ids(tokenizer, 0), peer_prompt)
    calls = embedding_calls(policy)
    off = trainer(policy, tokenizer, num_iterations=2).step([own, unlikely])
    off_calls = calls[0]
    on = trainer(policy, tokenizer, num_iterations=2, peer_logprob_gap=5.0).step([own, unlikely])
    assert off.peer_groups_dropped == 0 and on.peer_groups_dropped == 1 and on.num_groups == 1
    assert calls[0] - off_calls > off_calls


def importance_group(policy, prompt_ids, group, ratios) -> ScoredGroup:  # type: ignore[no-untyped-def]
    """``group`` as a peer's whose sender log-probs make each completion's token ratios
    ``exp(receiver - sender)`` the given value (None: sender log-probs unknown)."""
    completions = []
    for c, ratio in zip(group, ratios, strict=True):
        ids = list(c.token_ids)
        if ratio is None:
            completions.append(completion(ids))
        else:
            receiver = receiver_logprobs(policy, prompt_ids, ids)
            completions.append(completion(ids, [x - math.log(ratio) for x in receiver]))
    return ScoredGroup(prompt_ids, completions, REWARDS, origin="peer")


@pytest.mark.parametrize(
    ("mode", "effective"),
    [("truncate", [2.0, 1.5, 1.0, 0.25]), ("mask", [0.0, 1.5, 1.0, 0.0])],
)
def test_importance_weights_in_the_update(policy, tokenizer, setting, mode, effective) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    ratios = [4.0, 1.5, None, 0.25]  # above the cap, inside, unknown, below 1 / cap
    peer = importance_group(policy, peer_prompt, random_ids(tokenizer, 0), ratios)
    metrics = trainer(policy, tokenizer, peer_importance=mode, peer_importance_cap=2.0).step(
        [own, peer]
    )
    assert metrics.num_tokens == 8 * LENGTH  # masked tokens still count in the divisor
    expected = formula_grads(policy, terms_of(own) + terms_of(peer, effective), 8 * LENGTH)
    trained = trainer(policy, tokenizer, peer_importance=mode, peer_importance_cap=2.0)
    trained.step([own, peer])
    assert same(grads(policy), expected)
    assert metrics.peer_ess == pytest.approx(kish_ess(torch.tensor(effective)), rel=1e-5)
    assert metrics.kind == "mixed"


def test_a_masked_out_completion_contributes_no_gradient(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    peer = importance_group(policy, peer_prompt, random_ids(tokenizer, 0), [10.0, None, None, None])
    trainer(policy, tokenizer, peer_importance="mask").step([own, peer])
    masked = grads(policy)
    # the same divisor, the masked completion left out of the sum
    without = terms_of(own) + terms_of(peer)[1:]
    assert same(masked, formula_grads(policy, without, 8 * LENGTH))
    # own completions always weigh 1, whatever their sampler's log-probs
    shifted = [completion(list(c.token_ids), [x + 5 for x in c.logprobs]) for c in own.completions]
    own_shifted = ScoredGroup(own.prompt, shifted, REWARDS)
    trainer(policy, tokenizer, peer_importance="mask").step([own_shifted])
    assert same(grads(policy), formula_grads(policy, terms_of(own), 4 * LENGTH))


def test_positive_rule_trains_only_positive_peer_completions(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    peer = relabelled(random_ids(tokenizer, 0), peer_prompt)
    metrics = trainer(policy, tokenizer, peer_advantage="positive").step([own, peer])
    positive = grads(policy)
    mask = [1.0, 0.0, 1.0, 0.0]  # REWARDS' positive advantages
    expected = formula_grads(policy, terms_of(own) + terms_of(peer, mask), 8 * LENGTH)
    assert same(positive, expected)
    assert metrics.num_tokens == 8 * LENGTH and metrics.kind == "mixed"
    assert metrics.peer_ess == pytest.approx(0.5)  # half the peers' tokens weigh 1, half 0
    # own groups are trained whole
    trainer(policy, tokenizer, peer_advantage="positive").step([own])
    assert same(grads(policy), formula_grads(policy, terms_of(own), 4 * LENGTH))


def test_micro_batches_do_not_change_the_weighted_gradient(policy, tokenizer, setting) -> None:  # type: ignore[no-untyped-def]
    own, peer_prompt = setting
    peer = importance_group(policy, peer_prompt, random_ids(tokenizer, 0), [4.0, 1.5, None, 0.25])
    rules = {"peer_weight": 0.5, "peer_importance": "truncate", "peer_advantage": "positive"}
    results = []
    for size in (16, 4):
        metrics = trainer(policy, tokenizer, micro_batch_size=size, **rules).step([own, peer])
        results.append((metrics, grads(policy)))
    (whole, whole_grads), (split, split_grads) = results
    assert split.loss == pytest.approx(whole.loss, rel=1e-5)
    assert split.peer_ess == pytest.approx(whole.peer_ess, rel=1e-6)
    assert same(split_grads, whole_grads)


def test_shares_with_peer_rules_trained_together_equal_training_alone(
    pool: AdapterPool, tokenizer
) -> None:  # type: ignore[no-untyped-def]
    own_prompt, peer_prompt = prompt(tokenizer, "What is 2 + 2?"), prompt(tokenizer, "Say hi.")
    with pool.activate("alice") as model:
        mine = sampled(model, tokenizer, own_prompt, seed=1)
        theirs = sampled(model, tokenizer, peer_prompt, seed=2)
        likely = importance_group(model, peer_prompt, theirs, [4.0, 1.5, None, 0.25])
    own = ScoredGroup(own_prompt, mine, REWARDS)
    unlikely = relabelled(random_ids(tokenizer, 0), peer_prompt)
    groups = {"alice": [own, unlikely, likely], "bob": [own, likely]}
    config = GRPOConfig(
        max_completion_tokens=LENGTH,
        precision="float32",
        max_grad_norm=1e9,
        micro_batch_size=3,
        peers_only_steps=True,
        peer_weight=0.5,
        peer_logprob_gap=5.0,
        peer_importance="truncate",
        peer_advantage="positive",
    )

    def optimizer(name: str) -> torch.optim.SGD:
        return torch.optim.SGD(list(pool.adapter_parameters(name).values()), lr=0.0)

    def adapter_grads(name: str) -> dict[str, torch.Tensor]:
        return {k: p.grad.clone() for k, p in pool.adapter_parameters(name).items()}

    alone, alone_grads = {}, {}
    for name in groups:
        with pool.activate(name) as model:
            trainer = GRPOTrainer(model, tokenizer, config, optimizer(name))
            alone[name] = trainer.step(groups[name])
        alone_grads[name] = adapter_grads(name)
    shares = [TrainShare(groups[n], optimizer(n), n) for n in groups]
    with pool.rows(list(groups), trainable=True) as routing:
        together = train_together(pool.model, tokenizer, config, shares, routing=routing)
    for name, metrics in zip(groups, together, strict=True):
        reference = alone[name]
        assert metrics.peer_groups_dropped == reference.peer_groups_dropped
        assert metrics.kind == reference.kind == "mixed"
        assert metrics.num_tokens == reference.num_tokens
        assert metrics.loss == pytest.approx(reference.loss, rel=1e-4)
        assert metrics.peer_ess == pytest.approx(reference.peer_ess, rel=1e-5)
        assert metrics.peer_logprob_gap == pytest.approx(reference.peer_logprob_gap, rel=1e-4)
        assert same(adapter_grads(name), alone_grads[name])
    assert [m.peer_groups_dropped for m in together] == [1, 0]
