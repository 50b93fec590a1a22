"""Nodes of the swarm over real rounds on Anvil: publish, share, verify, train, and judge by
committee (seal, commit, reveal, settle, resolve, report), restart-safe."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from eth_account.signers.local import LocalAccount

from node.chain.events import (
    AgreementPenalized,
    DisputeSettled,
    EventReader,
    FlagResolved,
    RolloutsPublished,
    RoundSealed,
    VerdictRevealed,
    VerdictsCommitted,
)
from node.policy.checkpoint import read_checkpoint
from node.round.lockstep import run_lockstep
from node.round.node import SwarmNode
from tests.chain_fixtures import TEST_CONFIG, ChainControl
from tests.integration.swarm import (
    ETHER,
    CherryPickingNode,
    InflatingNode,
    MalformedNode,
    PaddingNode,
    ShieldingNode,
    published_digest,
)

pytestmark = pytest.mark.integration

#: Rounds until the first round's flags are settled: g=1, c=2, v=2 (J = 5), settle from r + 6.
FIRST_SETTLEMENT = (
    TEST_CONFIG.grace_rounds + TEST_CONFIG.commit_rounds + TEST_CONFIG.reveal_rounds + 1
)


def events(chain: ChainControl, kind: type, first_round: int) -> list:
    reader = EventReader(chain.w3, chain.deployment.coordinator)
    found = reader.read(chain.deployment.deployment_block, chain.w3.eth.block_number, events=[kind])
    return [e for e in found if e.round >= first_round]


def next_round(chain: ChainControl) -> int:
    """Moves to the next round and returns it: stake deposited at registration judges from the
    round after it (so nodes registered in this test judge from the round returned)."""
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    return round_


def honest_nodes(
    node_factory: Callable[..., SwarmNode], dev_accounts: list[LocalAccount]
) -> list[SwarmNode]:
    """Three honest nodes of dev accounts 1-3, each with its own seed."""
    return [node_factory(dev_accounts[i + 1], f"honest-{i}", seed=i) for i in range(3)]


def lora_b_norm(node: SwarmNode) -> float:
    params = node.learner.pool.adapter_parameters(node.learner.name)
    return sum(float(p.detach().norm()) for k, p in params.items() if "lora_B" in k)


def test_three_honest_nodes_share_train_and_commit_verdicts(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
) -> None:
    nodes = honest_nodes(node_factory, dev_accounts)
    fresh_round = next_round(chain)
    reports = run_lockstep(nodes, 3, chain.warp_to_round)

    rounds = range(fresh_round, fresh_round + 3)
    assert [r.round for r in reports] == [r for r in rounds for _ in nodes]
    for node in nodes:
        for r in rounds:
            digest = published_digest(node.exchange.client, r, node.address)
            assert digest is not None and digest == node.state.batches[r].digest
        assert read_checkpoint(node.state_dir).round == fresh_round + 2
        assert lora_b_norm(node) > 0  # the adapter moved away from the base
    for report in reports:
        assert report.published == "yes"
        assert report.verified_peers == 2 and not report.rejections
        assert report.local_groups == 2 and report.external_groups == 3
        assert report.trained
    assert len(events(chain, RolloutsPublished, fresh_round)) == 9  # nobody published twice
    # Round r is sealed and committed on in r + 2: here the first round, once, by everyone.
    assert [e.round for e in events(chain, RoundSealed, fresh_round)] == [fresh_round]
    committed = events(chain, VerdictsCommitted, fresh_round)
    assert sorted(e.attester for e in committed) == sorted(n.address for n in nodes)
    assert all(r.committed == 2 for r in reports if r.round == fresh_round + 2)
    for node in nodes:  # every batch was judged once, for training, and reused for the ballot
        ballot = node.state.ballots[fresh_round]
        assert ballot.committed and not ballot.revealed and len(ballot.items) == 2
        assert not any(item.is_flag for item in ballot.items)


@pytest.mark.slow
def test_a_cheater_is_slashed_by_committee_verdicts_and_its_shield_penalized(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
) -> None:
    honest = honest_nodes(node_factory, dev_accounts)
    cheat = node_factory(dev_accounts[4], "inflater", node_class=InflatingNode)
    shield = node_factory(dev_accounts[5], "shield", node_class=ShieldingNode)
    shield.friend = cheat.address
    nodes = [*honest, cheat, shield]
    fresh_round = next_round(chain)
    reports = run_lockstep(nodes, FIRST_SETTLEMENT + 1, chain.warp_to_round)
    client = cheat.exchange.client

    for report in (r for r in reports if r.peer in {n.address for n in honest}):
        assert report.rejections == {"reward_mismatch": 1}
        assert cheat.address not in report.external_from  # its groups are never trained on
    revealed = events(chain, VerdictRevealed, fresh_round)
    on_cheat = [e for e in revealed if e.subject == cheat.address]
    flaggers = {e.attester for e in on_cheat if e.is_flag}
    assert flaggers == {n.address for n in honest}
    assert {e.attester for e in on_cheat if not e.is_flag} == {shield.address}
    assert not any(e.is_flag for e in revealed if e.subject != cheat.address)

    settled = events(chain, DisputeSettled, fresh_round)
    assert [(e.round, e.subject, e.slashed) for e in settled] == [
        (fresh_round, cheat.address, True)
    ]
    assert settled[0].amount == ETHER // 2  # TEST_CONFIG slashes 50 %
    assert client.peer_info(cheat.address).stake == ETHER // 2
    resolved = events(chain, FlagResolved, fresh_round)
    assert sorted(e.flagger for e in resolved) == sorted(n.address for n in honest)
    assert all(e.upheld and e.amount > 0 for e in resolved)
    penalized = events(chain, AgreementPenalized, fresh_round)
    assert [(e.round, e.subject, e.attester) for e in penalized] == [
        (fresh_round, cheat.address, shield.address)
    ]
    assert client.peer_info(shield.address).stake == ETHER - TEST_CONFIG.flag_bond
    for node in honest:  # never slashed; round 1's bond back with a reward; later flags open
        info = client.peer_info(node.address)
        assert info.stake == ETHER and info.open_disputes == 0
        assert info.locked_bonds == info.open_flags * TEST_CONFIG.flag_bond
        assert info.open_flags == len(node.state.flags) == 2  # rounds 2 and 3: not settleable yet
        assert client.claimable(node.address) > 0


def test_a_peer_publishing_garbage_does_not_disturb_the_others(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
) -> None:
    honest = honest_nodes(node_factory, dev_accounts)
    garbage = node_factory(dev_accounts[5], "garbage", node_class=MalformedNode)
    fresh_round = next_round(chain)
    reports = run_lockstep([*honest, garbage], 2, chain.warp_to_round)

    for report in (r for r in reports if r.peer != garbage.address):
        assert report.published == "yes" and report.trained
        assert report.verified_peers == 2 and report.external_groups == 3
        assert report.rejections == {"bad_schema": 1}
    for node in honest:  # judged once and cached as a flag for the committee ballot
        judged = node.state.verdict(fresh_round, garbage.address)
        assert judged is not None and judged.checked > 0 and judged.agreed == 0
    garbage_reports = [r for r in reports if r.peer == garbage.address]
    assert all(r.published == "yes" for r in garbage_reports)


@pytest.mark.parametrize(
    ("node_class", "reason"),
    [(CherryPickingNode, "batch_shape"), (PaddingNode, "wrong_group_size")],
    ids=["cherry-picked", "padded"],
)
def test_a_batch_of_another_shape_than_the_rules_is_flagged_by_every_honest_node(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    node_class: type[SwarmNode],
    reason: str,
) -> None:
    """The v2 review's cherry-picked (one task of the round, 2G completions) and padded (2G
    completions per task) batches: every honest node flags them, and trains on none of them."""
    honest = honest_nodes(node_factory, dev_accounts)
    cheat = node_factory(dev_accounts[5], "shape", node_class=node_class)
    fresh_round = next_round(chain)
    reports = run_lockstep([*honest, cheat], 2, chain.warp_to_round)

    for report in (r for r in reports if r.peer != cheat.address):
        assert report.rejections == {reason: 1}
        assert cheat.address not in report.external_from
    for node in honest:  # cached as a flag over everything it committed, for the ballot
        judged = node.state.verdict(fresh_round, cheat.address)
        assert judged is not None and judged.agreed == 0 and judged.verified_reward_sum == 0
    client = cheat.exchange.client
    for node in honest:
        assert client.peer_info(node.address).stake == ETHER  # nobody honest lost stake


def test_a_node_restarted_mid_round_resumes_without_publishing_or_committing_twice(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
) -> None:
    a, b = (node_factory(dev_accounts[i + 1], f"peer-{i}", seed=i) for i in range(2))
    fresh_round = next_round(chain)
    run_lockstep([a, b], 2, chain.warp_to_round)
    round_ = fresh_round + 2  # the first round's commit phase
    a.produce(round_)
    b.produce(round_)
    client = a.exchange.client
    digest = published_digest(client, round_, a.address)
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
    assert published_digest(client, round_, a.address) == digest
    report = restarted.complete(round_)
    assert report.committed == 1
    ballot = restarted.state.ballots[fresh_round]
    # A second completion of the round (a retried round) finds the commitment on-chain.
    restarted.state.ballots[fresh_round] = ballot.model_copy(update={"committed": False})
    again = restarted.complete(round_)
    assert again.committed == 0 and restarted.state.ballots[fresh_round].committed
    b.complete(round_)
    assert report.trained and report.local_groups == 2 and report.external_groups == 3
    published = [e for e in events(chain, RolloutsPublished, fresh_round) if e.peer == a.address]
    assert [e.round for e in published] == [fresh_round, fresh_round + 1, round_]
    committed = [
        e for e in events(chain, VerdictsCommitted, fresh_round) if e.attester == a.address
    ]
    assert [e.round for e in committed] == [fresh_round]
    assert read_checkpoint(restarted.state_dir).round == round_


def test_a_stop_during_generation_ends_the_round_at_once_and_a_rerun_resumes(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
) -> None:
    """A Ctrl-C while the nodes generate stops them within a few decode steps (not at the end of
    the step): nothing is published for the round, and a later run publishes it once."""
    a, b = (node_factory(dev_accounts[i + 1], f"stopped-{i}", seed=i) for i in range(2))
    round_ = next_round(chain)
    asked = [0]

    def stop_after_a_few_checks() -> bool:  # 2 phase checks, then one per decode step
        asked[0] += 1
        return asked[0] > 4

    reports = run_lockstep([a, b], 1, chain.warp_to_round, should_stop=stop_after_a_few_checks)
    assert reports == [] and asked[0] == 5  # stopped at the third check inside generation
    assert a.learner.settings.sampling.max_new_tokens > 3  # so generation was cut short
    assert [e for e in events(chain, RolloutsPublished, round_)] == []
    reports = run_lockstep([a, b], 1, chain.warp_to_round)
    assert sorted(r.published for r in reports) == ["yes", "yes"]
    published = events(chain, RolloutsPublished, round_)
    assert sorted(e.peer for e in published) == sorted([a.address, b.address])
