"""Nodes of the swarm over real rounds on Anvil: publish, share, verify, train, attest, slash."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from eth_account.signers.local import LocalAccount

from node.chain.events import Attested, DisputeSettled, EventReader, RolloutsPublished
from node.policy.checkpoint import read_checkpoint
from node.round.lockstep import run_lockstep
from node.round.node import SwarmNode
from tests.chain_fixtures import ChainControl
from tests.integration.swarm import ETHER, InflatingNode, MalformedNode

pytestmark = pytest.mark.integration


def events(chain: ChainControl, kind: type, first_round: int) -> list:
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    found = reader.read(chain.deployment.deployment_block, chain.w3.eth.block_number, events=[kind])
    return [e for e in found if e.round >= first_round]


def honest_nodes(
    node_factory: Callable[..., SwarmNode], dev_accounts: list[LocalAccount]
) -> list[SwarmNode]:
    """Three honest nodes of dev accounts 1-3, each with its own seed."""
    return [node_factory(dev_accounts[i + 1], f"honest-{i}", seed=i) for i in range(3)]


def lora_b_norm(node: SwarmNode) -> float:
    params = node.learner.pool.adapter_parameters(node.learner.name)
    return sum(float(p.detach().norm()) for k, p in params.items() if "lora_B" in k)


def test_three_honest_nodes_share_train_and_attest_for_three_rounds(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    fresh_round: int,
) -> None:
    nodes = honest_nodes(node_factory, dev_accounts)
    reports = run_lockstep(nodes, 3, chain.warp_to_round)

    rounds = range(fresh_round, fresh_round + 3)
    assert [r.round for r in reports] == [r for r in rounds for _ in nodes]
    for node in nodes:
        for r in rounds:
            digest = node.exchange.client.publication(r, node.address)
            assert digest is not None and digest == node.state.batches[r].digest
        assert read_checkpoint(node.state_dir).round == fresh_round + 2
        assert lora_b_norm(node) > 0  # the adapter moved away from the base
    for report in reports:
        assert report.published == "yes"
        assert report.verified_peers == 2 and not report.rejections
        assert report.local_groups == 2 and report.external_groups == 3
        assert report.trained
    attested = events(chain, Attested, fresh_round)
    # Every peer published on time, so each node attested each round as soon as it had all.
    assert len(attested) == 3 * 2 * 3
    assert {(e.attester, e.subject) for e in attested} == {
        (a.address, b.address) for a in nodes for b in nodes if a is not b
    }
    assert not any(e.is_flag for e in attested)
    published = events(chain, RolloutsPublished, fresh_round)
    assert len(published) == 9  # nobody published twice


def test_a_reward_inflating_peer_is_flagged_settled_and_slashed(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    fresh_round: int,
) -> None:
    honest = honest_nodes(node_factory, dev_accounts)
    cheat = node_factory(dev_accounts[4], "inflater", node_class=InflatingNode)
    reports = run_lockstep([*honest, cheat], 4, chain.warp_to_round)

    for report in (r for r in reports if r.peer != cheat.address):
        assert report.rejections == {"reward_mismatch": 1}
        assert report.external_groups == 3
        assert cheat.address not in report.external_from  # its groups are never trained on
    flags = [e for e in events(chain, Attested, fresh_round) if e.subject == cheat.address]
    assert len(flags) == 3 * 4 and all(e.is_flag for e in flags)
    settled = [e for e in events(chain, DisputeSettled, fresh_round)]
    assert [(e.round, e.subject, e.slashed) for e in settled] == [
        (fresh_round, cheat.address, True)
    ]
    assert settled[0].amount == ETHER // 2  # TEST_CONFIG slashes 50 %
    assert cheat.exchange.client.peer_info(cheat.address).stake == ETHER // 2
    for node in honest:
        assert node.exchange.client.peer_info(node.address).stake == ETHER


def test_a_peer_publishing_garbage_does_not_disturb_the_others(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    fresh_round: int,
) -> None:
    honest = honest_nodes(node_factory, dev_accounts)
    garbage = node_factory(dev_accounts[5], "garbage", node_class=MalformedNode)
    reports = run_lockstep([*honest, garbage], 2, chain.warp_to_round)

    for report in (r for r in reports if r.peer != garbage.address):
        assert report.published == "yes" and report.trained
        assert report.verified_peers == 2 and report.external_groups == 3
        assert report.rejections == {"bad_schema": 1}
    attested = events(chain, Attested, fresh_round)
    honest_addresses = {node.address for node in honest}
    among_honest = [e for e in attested if {e.attester, e.subject} <= honest_addresses]
    assert len(among_honest) == 3 * 2 * 2 and not any(e.is_flag for e in among_honest)
    on_garbage = [e for e in attested if e.subject == garbage.address]
    assert len(on_garbage) == 3 * 2 and all(e.is_flag for e in on_garbage)
    garbage_reports = [r for r in reports if r.peer == garbage.address]
    assert all(r.published == "yes" for r in garbage_reports)


def test_a_node_restarted_mid_round_resumes_without_publishing_twice(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    fresh_round: int,
) -> None:
    a, b = (node_factory(dev_accounts[i + 1], f"peer-{i}", seed=i) for i in range(2))
    run_lockstep([a, b], 1, chain.warp_to_round)
    round_ = fresh_round + 1
    a.produce(round_)
    b.produce(round_)
    digest = a.exchange.client.publication(round_, a.address)
    saved = {k: v.clone() for k, v in a.learner.pool.adapter_state("peer-0").items()}

    # "Kill" a before it trains: its in-memory adapter is lost (scrambled here), its process gone.
    with torch.no_grad():
        for param in a.learner.pool.adapter_parameters("peer-0").values():
            param.add_(1.0)
    restarted = node_factory(dev_accounts[1], "peer-0", register=False, seed=0)
    restarted.start()
    restored = restarted.learner.pool.adapter_state("peer-0")
    assert all(torch.equal(restored[k], saved[k]) for k in saved)  # the adapter of round r-1

    report = restarted.produce(round_)
    assert report.published == "already"
    assert restarted.exchange.client.publication(round_, a.address) == digest
    report = restarted.complete(round_)
    b.complete(round_)
    assert report.trained and report.local_groups == 2 and report.external_groups == 3
    published = [e for e in events(chain, RolloutsPublished, fresh_round) if e.peer == a.address]
    assert [e.round for e in published] == [fresh_round, round_]
    assert read_checkpoint(restarted.state_dir).round == round_
