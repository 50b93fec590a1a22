"""One node, two exchanges: a node built by ``build_node`` behaves the same on the chain and
in-process, and the in-process exchange keeps the rules a node relies on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.models import Attestation
from node.config import with_overrides
from node.policy.adapters import AdapterPool
from node.policy.model import BaseModel, tiny_model
from node.round.exchange import ChainExchange
from node.round.factory import build_node, learner_settings
from node.round.inprocess import PARAMETERS, InProcessSwarm, MemoryStore
from node.round.state import OwnBatch
from node.storage import DigestMismatch, LocalStore, TooLarge
from tests.chain_fixtures import ChainControl
from tests.integration.swarm import ETHER, TEST_NODE, AnsweringLearner


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
    swarm = InProcessSwarm(on_chain.genesis_seed, round=fresh_round, domain=client.domain)
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
    digest = client.publication(fresh_round, account.address)
    assert digest is not None
    assert in_process.exchange.publication(fresh_round, account.address) == digest
    assert swarm.store.get(digest) == on_chain.exchange.store.get(digest)


def _batch(round: int, data: bytes, store: MemoryStore) -> OwnBatch:
    return OwnBatch(round=round, digest=store.put(data), groups=1, completions=2, reward_sum=500)


def test_in_process_publishing_keeps_the_contracts_rules(dev_accounts: list[LocalAccount]) -> None:
    swarm = InProcessSwarm(b"\x01" * 32, round=10)
    a, b = swarm.exchange(), swarm.exchange()
    a.join(dev_accounts[1].address)
    b.join(dev_accounts[2].address)
    assert not a.everyone_published(10, besides=dev_accounts[1].address)
    a.publish(_batch(10, b"a", swarm.store))
    with pytest.raises(ValueError, match="already published"):
        a.publish(_batch(10, b"a again", swarm.store))
    with pytest.raises(ValueError, match="not open"):
        b.publish(_batch(10 - PARAMETERS.grace_rounds - 1, b"too late", swarm.store))
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


def test_in_process_attestations_follow_the_contracts_order(
    dev_accounts: list[LocalAccount],
) -> None:
    swarm = InProcessSwarm(b"\x01" * 32, round=12)
    exchange = swarm.exchange()
    exchange.join(dev_accounts[1].address)
    subject = dev_accounts[2].address

    def item(round: int) -> Attestation:
        return Attestation(
            round=round,
            subject=subject,
            digest=b"\x02" * 32,
            checked=2,
            agreed=2,
            verified_reward_sum=0,
        )

    exchange.attest([item(10), item(11)])
    assert exchange.next_attest_round(dev_accounts[1].address) == 12
    with pytest.raises(ValueError, match="new and sorted"):
        exchange.attest([item(11)])  # attested already
    with pytest.raises(ValueError, match="new and sorted"):
        exchange.attest([item(13), item(12)])


def test_the_memory_store_rehashes_and_the_swarm_forgets_old_rounds() -> None:
    swarm = InProcessSwarm(b"\x01" * 32, round=0)
    exchange = swarm.exchange()
    exchange.join("0x" + "11" * 20)
    batch = _batch(0, b"round zero", swarm.store)
    exchange.publish(batch)
    with pytest.raises(TooLarge):
        swarm.store.get(batch.digest, max_size=len(b"round zero") - 1)
    swarm.store._blobs[batch.digest] = b"tampered"  # a store that lies
    with pytest.raises(DigestMismatch):
        swarm.store.get(batch.digest)
    swarm.advance(PARAMETERS.grace_rounds + PARAMETERS.attestation_window_rounds + 1)
    assert exchange.commitments([0]) == [] and not swarm.store.has(batch.digest)
