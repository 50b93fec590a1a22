"""One node, two exchanges: a node built by ``build_node`` behaves the same on the chain and
in-process, and the in-process exchange keeps the rules a node relies on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.committee import ballot_commitment, reveal_receipt
from node.chain.deployment import Deployment
from node.chain.models import VerdictItem, VerdictState
from node.chain.reverts import (
    SwarmCoordinatorAlreadyCommitted,
    SwarmCoordinatorCommitmentMismatch,
    SwarmCoordinatorNotPenalizable,
    SwarmCoordinatorWrongPhase,
)
from node.config import with_overrides
from node.policy.adapters import AdapterPool
from node.policy.model import BaseModel, tiny_model
from node.round.exchange import ChainExchange
from node.round.factory import build_node, learner_settings
from node.round.injudging import PHASES
from node.round.inprocess import InProcessSwarm, MemoryStore
from node.round.lockstep import run_lockstep
from node.round.node import SwarmNode
from node.round.state import OwnBatch
from node.storage import DigestMismatch, LocalStore, TooLarge
from tests.chain_fixtures import ChainControl
from tests.integration.swarm import (
    ETHER,
    TEST_NODE,
    AnsweringLearner,
    InflatingNode,
    published_digest,
)

#: The in-process swarms' batch shape: the test nodes' (the test chain's rules too).
SHAPE = TEST_NODE.batch_shape()


def _pool(tiny_base: BaseModel) -> AdapterPool:
    model = tiny_model(tiny_base.tokenizer, seed=0).eval().requires_grad_(False)
    return AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tiny_base.tokenizer))


def test_grpo_cutoff_is_the_samplers_max_new_tokens() -> None:
    config = with_overrides(TEST_NODE, {"generation": {"max_new_tokens": 37}})
    settings = learner_settings(config)
    assert settings.sampling.max_new_tokens == settings.grpo.max_completion_tokens == 37


def test_a_node_publishes_the_same_batch_on_the_chain_and_in_process(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    dev_accounts: list[LocalAccount],
    tiny_base: BaseModel,
    fresh_round: int,
    tmp_path: Path,
) -> None:
    account = dev_accounts[1]
    client = client_for(account)
    client.register("twin", 1 * ETHER)
    on_chain = build_node(
        with_overrides(TEST_NODE, {"model": {"checkpoint_dir": tmp_path / "chain"}}),
        account,
        ChainExchange(client, deployment, LocalStore(tmp_path / "store")),
        pool=_pool(tiny_base),
        learner_class=AnsweringLearner,
    )
    on_chain.start()
    swarm = InProcessSwarm(
        on_chain.genesis_seed, round=fresh_round, domain=client.domain, shape=SHAPE
    )
    in_process = build_node(
        with_overrides(TEST_NODE, {"model": {"checkpoint_dir": tmp_path / "memory"}}),
        account,
        swarm.exchange(),
        pool=_pool(tiny_base),
        learner_class=AnsweringLearner,
    )
    in_process.start()

    assert type(on_chain) is type(in_process)
    assert on_chain.tasks(fresh_round) == in_process.tasks(fresh_round)
    on_chain.produce(fresh_round)
    in_process.produce(fresh_round)
    digest = published_digest(client, fresh_round, account.address)
    assert digest is not None
    assert in_process.exchange.publication(fresh_round, account.address) == digest
    assert swarm.store.get(digest) == on_chain.exchange.store.get(digest)


def _batch(round: int, data: bytes, store: MemoryStore) -> OwnBatch:
    return OwnBatch(round=round, digest=store.put(data), groups=1, completions=2, reward_sum=500)


def test_in_process_publishing_keeps_the_contracts_rules(dev_accounts: list[LocalAccount]) -> None:
    swarm = InProcessSwarm(b"\x01" * 32, round=10, shape=SHAPE)
    a, b = swarm.exchange(), swarm.exchange()
    a.join(dev_accounts[1].address)
    b.join(dev_accounts[2].address)
    assert not a.everyone_published(10, besides=dev_accounts[1].address)
    a.publish(_batch(10, b"a", swarm.store))
    with pytest.raises(ValueError, match="already published"):
        a.publish(_batch(10, b"a again", swarm.store))
    with pytest.raises(ValueError, match="not open"):
        b.publish(_batch(10 - PHASES.grace_rounds - 1, b"too late", swarm.store))
    with pytest.raises(ValueError, match="not open"):
        b.publish(_batch(11, b"too early", swarm.store))
    b.publish(_batch(9, b"late but within grace", swarm.store))
    b.publish(_batch(10, b"b", swarm.store))
    assert a.everyone_published(10, besides=dev_accounts[1].address)
    round_10 = sorted([dev_accounts[1].address, dev_accounts[2].address])
    assert [(c.round, c.peer) for c in a.commitments(range(9, 11))] == [
        (9, dev_accounts[2].address),
        *[(10, peer) for peer in round_10],
    ]


def test_in_process_judging_keeps_the_contracts_phases_and_rules(
    dev_accounts: list[LocalAccount],
) -> None:
    swarm = InProcessSwarm(b"\x01" * 32, round=10, shape=SHAPE)
    peers = [dev_accounts[i].address for i in (1, 2, 3)]
    exchanges = [swarm.exchange() for _ in peers]
    for exchange, peer in zip(exchanges, peers):
        exchange.join(peer)
        exchange.publish(_batch(10, peer.encode(), swarm.store))
    cheat, judges = peers[0], list(zip(exchanges[1:], peers[1:]))
    salt = b"\x07" * 32

    def verdicts(agreed: int) -> list[VerdictItem]:
        return [VerdictItem(subject=cheat, checked=2, agreed=agreed, verified_reward_sum=0)]

    with pytest.raises(SwarmCoordinatorWrongPhase):
        exchanges[1].seal_round(10)  # publications of round 10 are still open
    swarm.advance(12)
    exchanges[1].seal_round(10)
    seal = exchanges[2].seal(10)
    assert seal is not None and seal.total_weight == 3 * exchanges[1].weight_at(peers[1], 10)
    for (exchange, peer), agreed in zip(judges, (0, 2)):  # one flag, one agreement
        exchange.commit_verdicts(10, ballot_commitment(peer, 10, verdicts(agreed), salt))
    with pytest.raises(SwarmCoordinatorAlreadyCommitted):
        exchanges[1].commit_verdicts(10, b"\x01" * 32)
    swarm.advance(14)
    with pytest.raises(SwarmCoordinatorCommitmentMismatch):
        exchanges[1].reveal_verdicts(10, verdicts(2), salt)  # not what it committed
    for (exchange, _), agreed in zip(judges, (0, 2)):
        exchange.reveal_verdicts(10, verdicts(agreed), salt)
    assert exchanges[1].ballot(10, peers[1]) == reveal_receipt(verdicts(0))
    swarm.advance(PHASES.settleable_from(10))
    exchanges[1].settle(10, cheat)
    # One flag against one agreement: no majority (quorum 50 %), and the agreement does not
    # outweigh the flag either: inconclusive, as the contract settles it.
    assert exchanges[1].verdict(10, cheat).state is VerdictState.INCONCLUSIVE
    exchanges[1].resolve_flag(10, cheat, peers[1])
    with pytest.raises(SwarmCoordinatorNotPenalizable):
        exchanges[1].report_agreement(10, peers[2], verdicts(2), 0)


def test_the_memory_store_rehashes_and_the_swarm_forgets_old_rounds() -> None:
    swarm = InProcessSwarm(b"\x01" * 32, round=0, shape=SHAPE)
    exchange = swarm.exchange()
    exchange.join("0x" + "11" * 20)
    batch = _batch(0, b"round zero", swarm.store)
    exchange.publish(batch)
    with pytest.raises(TooLarge):
        swarm.store.get(batch.digest, max_size=len(b"round zero") - 1)
    swarm.store._blobs[batch.digest] = b"tampered"  # a store that lies
    with pytest.raises(DigestMismatch):
        swarm.store.get(batch.digest)
    swarm.advance(PHASES.judging_rounds + 1)
    assert exchange.commitments([0]) == [] and not swarm.store.has(batch.digest)


@pytest.mark.slow
def test_in_process_committees_judge_a_cheater_like_the_contract(
    dev_accounts: list[LocalAccount], tiny_base: BaseModel, tmp_path: Path
) -> None:
    """Four in-process nodes, one inflating its rewards: the others flag it in committee ballots,
    settle it as upheld once settleable, and nobody else is ever judged wrong."""
    swarm = InProcessSwarm(InProcessSwarm.genesis_seed_for(3), round=1, shape=SHAPE)
    pool = _pool(tiny_base)

    def node(i: int, node_class: type[SwarmNode] = SwarmNode) -> SwarmNode:
        config = with_overrides(
            TEST_NODE, {"model": {"checkpoint_dir": tmp_path / str(i)}, "training": {"seed": i}}
        )
        return build_node(
            config, dev_accounts[i], swarm.exchange(), pool=pool, name=f"n{i}",
            learner_class=AnsweringLearner, node_class=node_class,
        )  # fmt: skip

    nodes = [node(1), node(2), node(3), node(4, InflatingNode)]
    cheat = nodes[-1].address
    reports = run_lockstep(nodes, PHASES.judging_rounds + 2, swarm.advance)

    judging = swarm.judging
    assert judging.slashed == [(1, cheat)]  # rounds 1..7: round 1 is settleable in round 7
    flaggers = {a for a, b in judging.revealed[1].items() if cheat in b.counted and any(
        i.subject == cheat and i.is_flag for i in b.items
    )}  # fmt: skip
    assert flaggers == {n.address for n in nodes[:3]}
    for revealed in judging.revealed.values():
        for ballot in revealed.values():
            assert all(not i.is_flag for i in ballot.items if i.subject != cheat)
    for n in nodes[:3]:  # round 1 settled and resolved; 2 and 3 revealed, waiting
        assert n.state.flags == [(2, cheat), (3, cheat)]
        assert (1, cheat, n.address) not in judging.flags
    assert sum(r.settled for r in reports) == 1 and sum(r.committed for r in reports) > 0
