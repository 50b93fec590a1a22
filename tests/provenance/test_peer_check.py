"""A receiver's recompute of the peer groups it would train on (node.provenance.peer_check).

A publisher (a real Learner over the tiny model) samples with the protocol's seeds and stores its
adapter in a real local store; a receiver with its own pool over the same base recomputes the
groups. Honest groups pass whole; each forgery fails with its reason, and then nothing of its
batch is trained on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from node.learning_data import GeneratedGroup  # noqa: E402
from node.policy.adapters import AdapterPool, LoraSettings  # noqa: E402
from node.policy.generation import SamplingConfig  # noqa: E402
from node.policy.grpo import GRPOConfig  # noqa: E402
from node.policy.model import BaseModel  # noqa: E402
from node.policy.peer_ids import written_completion  # noqa: E402
from node.provenance.check import ProvenanceResult  # noqa: E402
from node.provenance.peer_check import (  # noqa: E402
    BatchProvenance,
    KeptMargins,
    Recomputer,
    NamedAdapter,
    copied_adapters,
    copies,
    kept_margins,
)
from node.provenance.publish import publish_adapter  # noqa: E402
from node.provenance.seeds import batch_seeds  # noqa: E402
from node.rollouts import RejectReason  # noqa: E402
from node.rollouts.assemble import batch_completion  # noqa: E402
from node.rollouts.schema import ModelInfo  # noqa: E402
from node.round.learner import GenerateCall, Learner, LearnerSettings, run_calls  # noqa: E402
from node.sampling.verdicts import VerifiedGroup  # noqa: E402
from node.storage import KuboStore, LocalStore  # noqa: E402
from node.storage.chunked import put_chunked  # noqa: E402
from node.tasks import DEFAULT_PRESET_NAME, TaskItem, derive_tasks, get_preset  # noqa: E402
from tests.provenance.helpers import learner_model, peaked_tiny_model  # noqa: E402
from tests.storage.fake_kubo import running_fake_kubo  # noqa: E402
from tests.rollouts.factories import OTHER, PEER  # noqa: E402

ROUND = 4
ROUND_SEED = bytes([9]) * 32
G = 4
SETTINGS = LearnerSettings(
    sampling=SamplingConfig(max_new_tokens=8), grpo=GRPOConfig(max_completion_tokens=8)
)


def _pool(tokenizer) -> AdapterPool:  # type: ignore[no-untyped-def]
    """A pool over the peaked tiny model: peaked like a trained model's, its distributions put a
    wrong token far from ``u_t`` (the plain tiny model's are nearly uniform over 49,152 ids, so
    every boundary is within ~1e-3 of every ``u_t``)."""
    return AdapterPool(BaseModel(name="tiny", model=peaked_tiny_model(tokenizer, 1), tokenizer=tokenizer))


def _moved(learner: Learner, seed: int) -> None:
    """Gives the learner's adapter weights of its own (LoRA B starts at zero: every fresh adapter
    samples as the base does)."""
    generator = torch.Generator().manual_seed(seed)
    state = {k: torch.randn(v.shape, generator=generator) * 0.5 for k, v in learner.adapter_state().items()}
    learner.pool.load_adapter_state(learner.name, state)


@pytest.fixture(scope="module")
def tasks() -> list[TaskItem]:
    return list(derive_tasks(ROUND_SEED, PEER.address, get_preset(DEFAULT_PRESET_NAME))[:2])


@pytest.fixture(scope="module")
def publisher(tokenizer) -> Learner:  # type: ignore[no-untyped-def]
    learner = Learner(_pool(tokenizer), "publisher", tokenizer, SETTINGS, owner=PEER.address)
    _moved(learner, 1)
    return learner


@pytest.fixture(scope="module")
def receiver(tokenizer) -> Learner:  # type: ignore[no-untyped-def]
    return Learner(_pool(tokenizer), "receiver", tokenizer, SETTINGS, owner=OTHER.address)


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def _sampled(learner: Learner, tasks: list[TaskItem], peer: str = PEER.address) -> list[GeneratedGroup]:
    seeds = batch_seeds(ROUND_SEED, peer, [t.index for t in tasks], G)
    return learner.generate(tasks, G, seeds=seeds)


def _verified(
    tasks: list[TaskItem], generated: list[GeneratedGroup], model: ModelInfo, *, peer: str = PEER.address, round: int = ROUND
) -> list[VerifiedGroup]:
    groups = []
    for task, group in zip(tasks, generated, strict=True):
        completions = tuple(batch_completion(task, c) for c in group.completions)
        rewards = tuple(float(i % 2) for i in range(len(completions)))  # a GRPO signal
        groups.append(VerifiedGroup(peer, round, task, completions, rewards, model))
    return groups


def _check(receiver: Learner, store: LocalStore, groups: list[VerifiedGroup], **kwargs) -> BatchProvenance:  # type: ignore[no-untyped-def]
    recomputer = Recomputer(receiver.pool, receiver.tokenizer, store)
    outcomes = recomputer.check_peer_groups(groups, {ROUND: ROUND_SEED, ROUND - 1: ROUND_SEED}, **kwargs)
    return outcomes[(groups[0].round, groups[0].peer)]


def test_honest_groups_pass_whole_under_another_pool_over_the_same_base(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem]
) -> None:
    assert publisher.base_digest == receiver.base_digest
    address = publish_adapter(store, publisher.adapter_state())
    groups = _verified(tasks, _sampled(publisher, tasks), learner_model(publisher, address))

    outcome = _check(receiver, store, groups)

    assert outcome.reason is None and outcome.usable, outcome.detail
    assert outcome.result is not None and outcome.result.excluded == frozenset()
    assert outcome.result.worst_margin >= -1e-5
    assert [outcome.passed(g) for g in groups] == groups


def _forged(groups: list[VerifiedGroup], tokenizer, completions_of) -> list[VerifiedGroup]:  # type: ignore[no-untyped-def]
    return [dataclasses.replace(g, completions=completions_of(g)) for g in groups]


def test_hand_written_answers_are_flagged_and_not_trained_on(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem], tokenizer
) -> None:  # type: ignore[no-untyped-def]
    address = publish_adapter(store, publisher.adapter_state())
    honest = _verified(tasks, _sampled(publisher, tasks), learner_model(publisher, address))
    written = _forged(
        honest,
        tokenizer,
        lambda g: tuple(
            batch_completion(g.task, written_completion(tokenizer, f"<answer>{g.task.answer}</answer>"))
            for _ in g.completions
        ),
    )

    outcome = _check(receiver, store, written)

    assert outcome.reason is RejectReason.PROVENANCE
    assert outcome.result is not None and outcome.result.evidence is not None
    assert [outcome.passed(g) for g in written] == [None, None]


def test_an_edited_token_flags_the_batch(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem]
) -> None:
    address = publish_adapter(store, publisher.adapter_state())
    honest = _verified(tasks, _sampled(publisher, tasks), learner_model(publisher, address))
    first = honest[0].completions[0]
    ids = list(first.token_ids)
    ids[0] = (ids[0] + 1) % 1000
    edited = [dataclasses.replace(honest[0], completions=(first.model_copy(update={"token_ids": ids}),) + honest[0].completions[1:]), honest[1]]

    outcome = _check(receiver, store, edited)

    assert outcome.reason is RejectReason.PROVENANCE
    evidence = outcome.result.evidence  # type: ignore[union-attr]
    assert (evidence.group, evidence.completion, evidence.position) == (tasks[0].index, 0, 0)
    assert outcome.passed(honest[1]) is None  # nothing of a flagged batch is trained on


def test_claimed_log_probs_are_replaced_by_the_sampler_s_where_they_are_not_its(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem]
) -> None:
    """Honest ids with made-up log-probs (a peer wanting its tokens weighted up to the importance
    cap): the batch passes, and the receiver trains on the log-probs the recompute gave."""
    address = publish_adapter(store, publisher.adapter_state())
    honest = _verified(tasks, _sampled(publisher, tasks), learner_model(publisher, address))
    lowered = _forged(
        honest,
        None,
        lambda g: tuple(c.model_copy(update={"logprobs": [-20.0] * len(c.logprobs)}) for c in g.completions),
    )

    outcome = _check(receiver, store, lowered)

    assert outcome.usable and outcome.result is not None and outcome.result.excluded == frozenset()
    for claimed, sampled in zip(lowered, honest, strict=True):
        trained = outcome.passed(claimed)
        assert trained is not None and trained.rewards == sampled.rewards
        for got, true in zip(trained.completions, sampled.completions, strict=True):
            assert got.token_ids == true.token_ids
            assert got.logprobs == pytest.approx(true.logprobs, abs=1e-4)
    # honest claims stay as sent: the recompute agrees with them within the tolerance
    assert [_check(receiver, store, honest).passed(g) for g in honest] == honest


def test_kept_margins_spare_a_second_recompute_and_only_of_the_same_groups(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem], tmp_path: Path
) -> None:
    """What a node recomputed before training, its seat does not recompute again (nor fetch the
    adapter for); an edited completion or another adapter's address is recomputed afresh."""
    address = publish_adapter(store, publisher.adapter_state())
    honest = _verified(tasks, _sampled(publisher, tasks), learner_model(publisher, address))
    kept = KeptMargins()
    first = Recomputer(receiver.pool, receiver.tokenizer, store, kept).check_batch(honest, ROUND_SEED)
    assert first.usable

    empty = LocalStore(tmp_path / "empty")  # the adapter is not here: only kept margins answer
    again = Recomputer(receiver.pool, receiver.tokenizer, empty, kept)
    chosen = again.check_chosen(honest[1:], ROUND_SEED)  # a seat's check of one of the groups
    assert chosen.usable and chosen.result.checked == (tasks[1].index,)  # type: ignore[union-attr]
    assert again.check_batch(honest, ROUND_SEED) == first
    forgetful = Recomputer(receiver.pool, receiver.tokenizer, empty)
    assert forgetful.check_batch(honest, ROUND_SEED).reason is RejectReason.ADAPTER_MISSING

    completion = honest[0].completions[0]
    ids = list(completion.token_ids)
    ids[0] = (ids[0] + 1) % 1000
    edited = dataclasses.replace(
        honest[0], completions=(completion.model_copy(update={"token_ids": ids}),) + honest[0].completions[1:]
    )
    assert again.check_batch([edited], ROUND_SEED).reason is RejectReason.ADAPTER_MISSING
    assert Recomputer(receiver.pool, receiver.tokenizer, store, kept).check_batch(
        [edited], ROUND_SEED
    ).reason is RejectReason.PROVENANCE
    other = learner_model(publisher, bytes(range(32)))
    moved = [dataclasses.replace(g, model=other) for g in honest]
    assert again.check_batch(moved, ROUND_SEED).reason is RejectReason.ADAPTER_MISSING

    kept.forget_before(ROUND + 1)
    assert again.check_batch(honest, ROUND_SEED).reason is RejectReason.ADAPTER_MISSING

    # what is kept belongs to the base model: nodes over one pool share it, others do not
    assert kept_margins(receiver.pool) is kept_margins(receiver.pool)
    assert kept_margins(publisher.pool) is not kept_margins(receiver.pool)


def test_samples_of_another_adapter_with_the_right_seeds_fail(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem], tokenizer
) -> None:  # type: ignore[no-untyped-def]
    named = publish_adapter(store, publisher.adapter_state())
    other = Learner(_pool(tokenizer), "other", tokenizer, SETTINGS, owner=OTHER.address)
    _moved(other, 2)
    groups = _verified(tasks, _sampled(other, tasks), learner_model(publisher, named))

    assert _check(receiver, store, groups).reason is RejectReason.PROVENANCE


def test_samples_of_the_base_model_with_the_right_seeds_fail(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem], tokenizer
) -> None:  # type: ignore[no-untyped-def]
    named = publish_adapter(store, publisher.adapter_state())
    base = Learner(_pool(tokenizer), "base", tokenizer, SETTINGS, owner=OTHER.address)  # B = 0
    groups = _verified(tasks, _sampled(base, tasks), learner_model(publisher, named))

    assert _check(receiver, store, groups).reason is RejectReason.PROVENANCE


def test_a_missing_adapter_forfeits_training_without_a_flag(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem]
) -> None:
    groups = _verified(tasks, _sampled(publisher, tasks), learner_model(publisher, bytes(range(32))))

    outcome = _check(receiver, store, groups)

    assert outcome.reason is RejectReason.ADAPTER_MISSING and not outcome.usable
    assert outcome.result is None


def test_an_adapter_of_another_shape_or_bytes_that_are_none_are_a_mismatch(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem], tokenizer
) -> None:  # type: ignore[no-untyped-def]
    sampled = _sampled(publisher, tasks)
    small = Learner(
        _pool(tokenizer), "small", tokenizer, dataclasses.replace(SETTINGS, lora=LoraSettings(rank=4))
    )
    wrong_shape = publish_adapter(store, small.adapter_state())  # rank 4 under a rank-16 record
    not_an_adapter = put_chunked(store, b"not safetensors at all" * 100, pin=True)

    for address in (wrong_shape, not_an_adapter):
        groups = _verified(tasks, sampled, learner_model(publisher, address))
        outcome = _check(receiver, store, groups)
        assert outcome.reason is RejectReason.ADAPTER_MISMATCH, outcome.detail


def test_an_adapter_another_publisher_named_this_round_or_the_last_is_a_copy(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem]
) -> None:
    address = publish_adapter(store, publisher.adapter_state())
    model = learner_model(publisher, address)
    original = _verified(tasks, _sampled(publisher, tasks), model, round=ROUND - 1)
    copier = _verified(tasks, _sampled(publisher, tasks, OTHER.address), model, peer=OTHER.address)

    outcome = _check(receiver, store, copier, others=original)

    assert outcome.reason is RejectReason.ADAPTER_MISMATCH
    assert copied_adapters(original + copier) == {(ROUND, OTHER.address)}  # the later one
    same_round = [dataclasses.replace(g, round=ROUND) for g in original]
    assert copied_adapters(same_round + copier) == {(ROUND, PEER.address), (ROUND, OTHER.address)}
    later = [dataclasses.replace(g, round=ROUND + 1) for g in copier]
    assert copied_adapters(original + later) == set()  # two rounds apart: not a copy
    # among the candidates themselves, with nothing else verified, the copy is seen too
    recomputer = Recomputer(receiver.pool, receiver.tokenizer, store)
    kept, outcomes = recomputer.passing(original + copier, 4, {ROUND: ROUND_SEED, ROUND - 1: ROUND_SEED})
    assert [(o.peer, o.reason) for o in outcomes] == [
        (PEER.address, None),
        (OTHER.address, RejectReason.ADAPTER_MISMATCH),
    ]
    assert {g.peer for g in kept} <= {PEER.address}


def test_where_the_chain_order_is_known_only_the_later_of_one_rounds_two_batches_copied() -> None:
    """A copier cannot get its victim flagged by naming the victim's adapter in the same round:
    a committee seat knows who published first."""
    a, b = "0x" + "aa" * 32, "0x" + "bb" * 32
    first = NamedAdapter(ROUND, PEER.address, a, (10, 0))
    later = NamedAdapter(ROUND, OTHER.address, a, (10, 1))
    assert copies([first, later]) == {(ROUND, OTHER.address)}
    assert copies([dataclasses.replace(later, position=(9, 5)), first]) == {(ROUND, PEER.address)}
    unknown = dataclasses.replace(later, position=None)
    assert copies([first, unknown]) == {(ROUND, PEER.address), (ROUND, OTHER.address)}
    # the round before is always earlier, whatever the positions; two rounds apart is no copy
    before = NamedAdapter(ROUND - 1, PEER.address, a, (99, 0))
    assert copies([before, later]) == {(ROUND, OTHER.address)}
    assert copies([dataclasses.replace(before, round=ROUND - 2), later]) == set()
    # one publisher naming its adapter of the last round again (it did not train) copied nobody
    assert copies([before, dataclasses.replace(first, adapter=a)]) == set()
    assert copies([first, dataclasses.replace(later, adapter=b)]) == set()


def test_excluded_completions_are_dropped_and_a_group_without_signal_is_too() -> None:
    task = derive_tasks(ROUND_SEED, PEER.address, get_preset(DEFAULT_PRESET_NAME))[0]
    group = VerifiedGroup(PEER.address, ROUND, task, ("a", "b", "c", "d"), (1.0, 0.0, 1.0, 0.0))  # type: ignore[arg-type]
    result = ProvenanceResult((task.index,), frozenset({(task.index, 1)}), None, -5e-4)
    outcome = BatchProvenance(PEER.address, ROUND, None, result=result)
    assert outcome.passed(group) == dataclasses.replace(group, completions=("a", "c", "d"), rewards=(1.0, 1.0, 0.0))

    no_signal = ProvenanceResult((task.index,), frozenset({(task.index, 1), (task.index, 3)}), None, -5e-4)
    assert BatchProvenance(PEER.address, ROUND, None, result=no_signal).passed(group) is None


def test_groups_sampled_in_a_batch_of_several_nodes_adapters_pass(
    receiver: Learner, store: LocalStore, tasks: list[TaskItem], tokenizer
) -> None:  # type: ignore[no-untyped-def]
    """In-process nodes generate together, each row through its own adapter (``pool.rows``); the
    receiver recomputes with one adapter active: the two forwards must agree within drift."""
    pool = _pool(tokenizer)
    nodes = [Learner(pool, f"n{i}", tokenizer, SETTINGS, owner=a.address) for i, a in enumerate((PEER, OTHER))]
    for i, node in enumerate(nodes):
        _moved(node, 10 + i)
    peers = (PEER.address, OTHER.address)
    calls = [
        GenerateCall(node, tuple(tasks), G, tuple(tuple(s) for s in batch_seeds(ROUND_SEED, peer, [t.index for t in tasks], G)))
        for node, peer in zip(nodes, peers, strict=True)
    ]
    results = run_calls(calls)

    for node, peer, generated in zip(nodes, peers, results, strict=True):
        address = publish_adapter(store, node.adapter_state())
        groups = _verified(tasks, generated, learner_model(node, address), peer=peer)
        outcome = _check(receiver, store, groups)
        assert outcome.reason is None and outcome.result.excluded == frozenset(), outcome.detail  # type: ignore[union-attr]
        assert outcome.result.worst_margin >= -1e-5  # type: ignore[union-attr]


def test_a_shape_the_base_lacks_is_a_mismatch_and_scratch_adapters_never_pile_up(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem], tokenizer
) -> None:  # type: ignore[no-untyped-def]
    address = publish_adapter(store, publisher.adapter_state())
    model = learner_model(publisher, address)
    bogus = model.model_copy(update={"lora": model.lora.model_copy(update={"targets": ["no_such_proj"]})})
    outcome = _check(receiver, store, _verified(tasks, _sampled(publisher, tasks), bogus))
    assert outcome.reason is RejectReason.ADAPTER_MISMATCH and "not found" in outcome.detail

    for rank in (2, 3, 4):  # a peer naming a new shape every round
        lora = LoraSettings(rank=rank)
        state = Learner(_pool(tokenizer), f"r{rank}", tokenizer, dataclasses.replace(SETTINGS, lora=lora)).adapter_state()
        with receiver.pool.borrowed(lora, state):
            pass
    assert sum(n.startswith("borrowed-") for n in receiver.pool.names) == 1


def test_hanging_adapters_cost_at_most_the_budget_and_the_rest_are_not_trained_on(
    publisher: Learner, receiver: Learner, tasks: list[TaskItem]
) -> None:
    """Three peers whose adapters never arrive (a store that hangs): the first batch is given up
    at the store's timeout, and no batch is begun once the budget is spent."""
    peers = [PEER.address, OTHER.address, "0x90F79bf6EB2c4f870365E785982E1f101E93b906"]
    sampled = _sampled(publisher, tasks)
    candidates = [  # each its own adapter, never stored (one adapter named thrice is a copy)
        g
        for i, p in enumerate(peers)
        for g in _verified(tasks, sampled, learner_model(publisher, bytes([i]) * 32), peer=p)
    ]
    with running_fake_kubo() as kubo:
        kubo.mode = "hang"
        recomputer = Recomputer(receiver.pool, receiver.tokenizer, KuboStore(kubo.url, timeout=0.3))
        kept, outcomes = recomputer.passing(candidates, 4, {ROUND: ROUND_SEED}, budget=0.1)
        kubo.release.set()

    assert kept == []
    assert [(o.peer, o.reason) for o in outcomes] == [(PEER.address, RejectReason.ADAPTER_MISSING)]


def test_passing_takes_groups_in_order_until_enough_have_passed(
    publisher: Learner, receiver: Learner, store: LocalStore, tasks: list[TaskItem], tokenizer
) -> None:  # type: ignore[no-untyped-def]
    honest = _verified(tasks, _sampled(publisher, tasks), learner_model(publisher, publish_adapter(store, publisher.adapter_state())))
    forger = Learner(_pool(tokenizer), "forger", tokenizer, SETTINGS, owner=OTHER.address)
    _moved(forger, 3)
    own_adapter = learner_model(forger, publish_adapter(store, forger.adapter_state()))  # not a copy
    written = [
        dataclasses.replace(
            g,
            peer=OTHER.address,
            model=own_adapter,
            completions=tuple(
                batch_completion(g.task, written_completion(tokenizer, f"<answer>{g.task.answer}</answer>"))
                for _ in g.completions
            ),
        )
        for g in honest
    ]
    recomputer = Recomputer(receiver.pool, receiver.tokenizer, store)

    kept, outcomes = recomputer.passing([written[0], honest[0], written[1], honest[1]], 1, {ROUND: ROUND_SEED})

    assert kept == [honest[0]]  # the forger's group was tried first and refused
    assert [(o.peer, o.reason) for o in outcomes] == [(OTHER.address, RejectReason.PROVENANCE), (PEER.address, None)]
