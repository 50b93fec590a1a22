"""Fixtures of the swarm integration tests: a fresh tiny base, a shared store, node factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.events import AgreementPenalized, DisputeSettled, EventReader, FlagResolved
from node.policy.adapters import AdapterPool
from node.policy.model import BaseModel, tiny_model
from node.round.node import SwarmNode
from node.storage import LocalStore
from tests.chain_fixtures import ChainControl
from tests.integration.swarm import make_node


@pytest.fixture
def pool(tiny_base: BaseModel) -> AdapterPool:
    """A fresh tiny model per test (a pool injects LoRA layers into its base in place)."""
    model = tiny_model(tiny_base.tokenizer, seed=0).eval().requires_grad_(False)
    return AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tiny_base.tokenizer))


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def node_factory(
    chain: ChainControl,
    deployment: Deployment,
    client_for: Callable[..., CoordinatorClient],
    store: LocalStore,
    pool: AdapterPool,
    tmp_path: Path,
) -> Iterator[Callable[..., SwarmNode]]:
    """``node_factory(account, name, node_class=SwarmNode, register=True)`` -> a node. After the
    test, no node of the plain SwarmNode class may have lost stake to the dispute game."""

    first_block = chain.w3.eth.block_number + 1
    honest: set[str] = set()

    def make(account: LocalAccount, name: str, **options: object) -> SwarmNode:
        if options.get("node_class", SwarmNode) is SwarmNode:
            honest.add(account.address)
        return make_node(
            account,
            client=client_for(account),
            deployment=deployment,
            store=store,
            pool=pool,
            state_dir=tmp_path / "nodes" / name,
            name=name,
            **options,  # type: ignore[arg-type]
        )

    yield make
    assert_no_honest_node_lost_stake(chain, honest, first_block)


def assert_no_honest_node_lost_stake(chain: ChainControl, honest: set[str], first: int) -> None:
    """Every scenario ends with no honest node slashed, penalized for an agreement, or losing a
    flag's bond (whatever the dishonest nodes of the scenario did)."""
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    kinds = [DisputeSettled, AgreementPenalized, FlagResolved]
    head = chain.w3.eth.block_number
    if head < first:  # nothing happened (or the test replaced the chain)
        return
    events = reader.read(first, head, events=kinds)
    lost = [
        e
        for e in events
        if (isinstance(e, DisputeSettled) and e.slashed and e.subject in honest)
        or (isinstance(e, AgreementPenalized) and e.attester in honest)
        or (isinstance(e, FlagResolved) and not e.upheld and e.flagger in honest)
    ]
    assert not lost, f"honest nodes lost stake: {lost}"


@pytest.fixture
def fresh_round(chain: ChainControl) -> int:
    """Moves to the start of the next round and returns it."""
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    return round_
