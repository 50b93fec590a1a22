"""Provenance on a real chain and a real local store: a receiver recomputes every peer group it
would train on under the adapter the peer's batch names, and trains on none that its sampler did
not pick (docs/PROTOCOL.md, "Seeded sampler").

The receiver samples honestly (a plain Learner over the tiny model); each forger is an
AnsweringLearner, which writes the reference answer into every other completion, so its groups
have a reward signal and would be trained on. The same forger is trained on by a receiver that
does not recompute: the check, not the setup, keeps it out.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from eth_account.signers.local import LocalAccount

from node.round.learner import Learner
from node.round.lockstep import run_lockstep
from node.round.node import SwarmNode
from tests.chain_fixtures import ETHER, ChainControl
from node.chain.client import CoordinatorClient
from node.chain.events import ProvenanceEvidence
from node.chain.models import VerdictState
from node.round.injudging import PHASES
from tests.integration.swarm import CopyingNode, ForgingNode, WeightCopyingNode, WithholdingNode

pytestmark = pytest.mark.integration


def _start(chain: ChainControl) -> None:
    chain.warp_to_round(chain.current_round() + 1)


def _receiver(
    make: Callable[..., SwarmNode], account: LocalAccount, *, check: bool, name: str = "receiver"
) -> SwarmNode:
    """An honest node (a plain Learner: it samples what it publishes); each needs its own name,
    which names its adapter in the shared pool and its state folder."""
    return make(account, name, learner_class=Learner, check_provenance=check)


@pytest.mark.parametrize("check", [True, False], ids=["recomputing", "trusting"])
def test_hand_written_answers_are_never_trained_on_by_a_receiver_that_recomputes(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    check: bool,
) -> None:
    receiver = _receiver(node_factory, dev_accounts[1], check=check)
    forger = node_factory(dev_accounts[2], "forger")
    _start(chain)
    reports = [r for r in run_lockstep([receiver, forger], 2, chain.warp_to_round) if r.peer == receiver.address]

    for report in reports:
        assert report.verified_peers == 1  # the forger's rewards are right: intake accepts it
        if check:
            assert report.rejections == {"provenance": 1}
            assert report.external_groups == 0 and forger.address not in report.external_from
            assert report.provenance_checked >= 1
        else:
            assert not report.rejections and report.external_from[forger.address] > 0


def test_a_withheld_adapter_keeps_a_batch_out_of_training(
    chain: ChainControl, dev_accounts: list[LocalAccount], node_factory: Callable[..., SwarmNode]
) -> None:
    receiver = _receiver(node_factory, dev_accounts[1], check=True)
    forger = node_factory(dev_accounts[2], "withholder", node_class=WithholdingNode)
    _start(chain)
    reports = [r for r in run_lockstep([receiver, forger], 2, chain.warp_to_round) if r.peer == receiver.address]

    for report in reports:
        assert report.rejections == {"adapter_missing": 1}
        assert report.external_groups == 0 and report.provenance_checked == 0


def test_a_copied_adapter_keeps_a_batch_out_of_training(
    chain: ChainControl, dev_accounts: list[LocalAccount], node_factory: Callable[..., SwarmNode]
) -> None:
    receiver = _receiver(node_factory, dev_accounts[1], check=True)
    original = node_factory(dev_accounts[2], "original")
    copier = node_factory(dev_accounts[3], "copier", node_class=CopyingNode)
    copier.friend = original
    _start(chain)
    reports = run_lockstep([receiver, original, copier], 2, chain.warp_to_round)

    assert original.state.batches  # the copier named the very adapter the original published
    for round, record in copier.state.batches.items():
        assert record.adapter == original.state.batches[round].adapter
    for report in (r for r in reports if r.peer == receiver.address):
        # one round, one adapter: the receiver cannot tell the copy, and trains on neither
        assert report.rejections == {"adapter_mismatch": 2}
        assert report.external_groups == 0


def _every_seat_recomputes(owner: CoordinatorClient, chain: ChainControl) -> int:
    """Schedules k = 3 = m (every seat recomputes: every forged group drawn is seen); returns
    the first round it governs."""
    rules = owner.rules_at(chain.current_round()).model_copy(update={"committee_size": 3})
    owner.schedule_parameters(ETHER, rules)
    return owner.rules_by_index(owner.rules_count() - 1).from_round


def _evidence(node: SwarmNode, chain: ChainControl, round: int) -> list[ProvenanceEvidence]:
    reader = node.exchange.view.reader
    return reader.read(0, chain.w3.eth.block_number, events=[ProvenanceEvidence], round=round)


def test_honest_seats_that_recompute_each_other_never_post_evidence_or_flag(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    client_for: Callable[..., CoordinatorClient],
) -> None:
    """Three honest nodes, every seat recomputing two groups of each other's batches for three
    rounds of batches: no evidence, no flag, every batch agreed by both other seats."""
    owner = client_for(dev_accounts[0])
    start = _every_seat_recomputes(owner, chain)
    nodes = [_receiver(node_factory, dev_accounts[i], check=True, name=f"honest-{i}") for i in (1, 2, 3)]
    chain.warp_to_round(start)
    reports = run_lockstep(nodes, PHASES.judging_rounds + 3, chain.warp_to_round)

    assert sum(r.provenance_checked for r in reports) > 0
    assert all(r.worst_margin is None or r.worst_margin > -1e-4 for r in reports)
    for round in range(start, start + 3):
        assert _evidence(nodes[0], chain, round) == []
        for node in nodes:
            verdict = owner.verdict(round, node.address)
            assert (verdict.flaggers, verdict.agreers) == (0, 2), (round, node.address)


def test_a_committee_posts_evidence_against_a_forger_and_its_flags_slash_it(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    client_for: Callable[..., CoordinatorClient],
) -> None:
    """k = 3 = m: every seat recomputes. Two honest seats recompute two groups each of the
    forger's batch, post evidence, re-check each other's, flag it; the flags are upheld and the
    forger is slashed. Neither honest batch is flagged (the factory asserts no honest node lost
    stake)."""
    owner = client_for(dev_accounts[0])
    start = _every_seat_recomputes(owner, chain)
    honest = [_receiver(node_factory, dev_accounts[i], check=True, name=f"honest-{i}") for i in (1, 2)]
    forger = node_factory(dev_accounts[3], "forger", node_class=ForgingNode)
    stake = owner.peer_info(forger.address).stake
    chain.warp_to_round(start)
    run_lockstep([*honest, forger], PHASES.judging_rounds + 2, chain.warp_to_round)

    posted = {e.poster for e in _evidence(honest[0], chain, start) if e.subject == forger.address}
    assert posted == {h.address for h in honest}
    assert owner.verdict(start, forger.address).state is VerdictState.UPHELD
    assert owner.peer_info(forger.address).stake < stake
    for node in honest:
        assert owner.verdict(start, node.address).flaggers == 0


def test_a_committee_flags_a_copier_of_an_adapter_and_never_the_node_it_copied(
    chain: ChainControl,
    dev_accounts: list[LocalAccount],
    node_factory: Callable[..., SwarmNode],
    client_for: Callable[..., CoordinatorClient],
) -> None:
    """k = 3 = m. The copier samples honestly with the weights the original published that
    round and publishes after it: every recompute passes, but both seats on the copier (the
    original, and an honest node that verified both) know the adapter was named earlier, flag
    it and slash it. The original, named first on the chain, is agreed by both of its seats,
    the copier's included."""
    owner = client_for(dev_accounts[0])
    start = _every_seat_recomputes(owner, chain)
    original = _receiver(node_factory, dev_accounts[1], check=True, name="original")
    seat = _receiver(node_factory, dev_accounts[2], check=True, name="bystander")
    copier = node_factory(
        dev_accounts[3], "weight-copier", node_class=WeightCopyingNode, learner_class=Learner,
        check_provenance=True,
    )  # fmt: skip
    copier.friend = original
    stake = owner.peer_info(copier.address).stake
    chain.warp_to_round(start)
    # one node after another: the copier publishes after the original, as a copier must
    run_lockstep([original, seat, copier], PHASES.judging_rounds + 2, chain.warp_to_round, together=False)

    assert copier.state.batches  # the rounds still kept: each named the original's adapter
    for round, record in copier.state.batches.items():
        assert record.adapter == original.state.batches[round].adapter
    posted = {e.poster for e in _evidence(seat, chain, start) if e.subject == copier.address}
    assert posted == {original.address, seat.address}
    assert owner.verdict(start, copier.address).state is VerdictState.UPHELD
    assert owner.peer_info(copier.address).stake < stake
    for node in (original, seat):
        assert (owner.verdict(start, node.address).flaggers, owner.verdict(start, node.address).agreers) == (0, 2)
