"""``swarm audit ROUND`` on real rounds: real Anvil with the contract deployed by forge, real
signed batches in a real local-folder store, committees that commit and reveal on-chain."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from node.audit import AuditError, AuditSettings, audit_round
from node.audit.command import EXIT_AGREE, EXIT_DISAGREE, EXIT_ERROR, audit
from node.audit.receipt import canonical
from tests.audit.rounds import BASES, TOKENS, agreeing, judge, node_items, publish_all, start
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


@click.group()
@click.option("--config", "config_path", type=click.Path(path_type=Path), required=True)
@click.pass_context
def swarm(ctx: click.Context, config_path: Path) -> None:
    """Stands in for ``swarm`` (node.cli.main): the same ``--config`` context object."""
    ctx.obj = {"config_path": config_path, "config_given": True}


swarm.add_command(audit)


def write_config(tmp_path: Path, chain, deployment, store_dir: Path) -> Path:
    path = tmp_path / "node.toml"
    path.write_text(
        f'[chain]\nrpc_url = "{chain.w3.provider.endpoint_uri}"\n'
        f'deployment = "{deployment.save(tmp_path / "deployment.json")}"\n'
        f'[storage]\nstore = "{store_dir}"\nfetch_timeout = 5.0\n'
        '[model]\nsource = "tiny"\n'
    )
    return path


def run_audit(config: Path, *args: str):
    return CliRunner().invoke(swarm, ["--config", str(config), "audit", *args])


@pytest.fixture
def swarm_round(chain, client_for, dev_accounts, tmp_path):
    return start(chain, client_for, dev_accounts[1:5], tmp_path / "store")


def honest_committee(swarm_round) -> dict:
    return {name: node_items(swarm_round, name) for name in swarm_round.clients}


def test_a_clean_round_agrees_and_prints_a_receipt(swarm_round, chain, deployment, tmp_path):
    publish_all(swarm_round)
    judge(swarm_round, honest_committee(swarm_round))
    config = write_config(tmp_path, chain, deployment, tmp_path / "store")
    result = run_audit(config, str(swarm_round.round))
    assert result.exit_code == EXIT_AGREE, result.output
    lines = result.output.splitlines()
    assert lines[-2] == "all batches agree with the chain"
    assert lines[-1].startswith("receipt sha256 ") and len(lines[-1].split()[-1]) == 64
    for name in swarm_round.clients:
        assert f"batch of peer {swarm_round.address(name)}, digest 0x" in result.output
    assert result.output.count("  agreement") == 4 and "DISAGREEMENT" not in result.output
    assert result.output.count("outcome not disputed (nobody flagged)") == 4
    assert result.output.count("    agree by voter 0x") == 12  # 3 votes on each of 4 batches
    # each batch recomputed under the adapter it names: these batches were written by hand and
    # name an adapter nobody stored
    assert result.output.count("  provenance  adapter_missing: ") == 4
    as_json = run_audit(config, str(swarm_round.round), "--json")
    assert as_json.exit_code == EXIT_AGREE
    report = json.loads(as_json.output)
    assert report["sha256"] == hashlib.sha256(canonical(report["receipt"])).hexdigest()
    assert report["sha256"] == lines[-1].split()[-1]  # the same receipt, the same hash
    batches = report["receipt"]["batches"]
    assert [b["committee"]["agreers"] for b in batches] == [3, 3, 3, 3]
    assert all(len(b["committee"]["votes"]) == 3 for b in batches)
    assert all(b["own"]["decision"] == "agree" and b["agrees"] for b in batches)


def test_an_upheld_cheater_agrees_with_the_audit(swarm_round, chain, deployment, tmp_path):
    publish_all(swarm_round, cheater="carol")
    judge(swarm_round, honest_committee(swarm_round))
    carol = swarm_round.address("carol")
    swarm_round.clients["alice"].settle(swarm_round.round, carol)
    result = audit_round(
        swarm_round.clients["alice"],
        swarm_round.store,
        swarm_round.round,
        start_block=deployment.deployment_block,
        tokens=TOKENS,
        bases=BASES,
    )
    assert result.agrees
    (batch,) = [b for b in result.batches if b.subject == carol]
    assert (batch.own.decision, batch.committee.decision) == ("flag", "flag")
    assert batch.committee.outcome == "upheld" and batch.committee.flaggers == 3


def test_a_committee_that_accepted_a_cheater_is_a_disagreement(
    swarm_round, chain, deployment, tmp_path
):
    """Every committee member agrees with carol's inflated batch (a committee without an honest
    seat): the chain says accepted, the audit's own re-scoring says flag."""
    publish_all(swarm_round, cheater="carol")
    carol = swarm_round.address("carol")
    ballots = {
        name: [agreeing(item) if item.subject == carol else item for item in items]
        for name, items in honest_committee(swarm_round).items()
    }
    judge(swarm_round, ballots)
    config = write_config(tmp_path, chain, deployment, tmp_path / "store")
    result = run_audit(config, str(swarm_round.round))
    assert result.exit_code == EXIT_DISAGREE, result.output
    assert f"DISAGREEMENT on 1 batch(es), of peer(s) {carol}" in result.output
    assert "own check flags it" in result.output and "the committee accepted it" in result.output
    report = json.loads(run_audit(config, str(swarm_round.round), "--json").output)
    flagged = [b for b in report["receipt"]["batches"] if not b["agrees"]]
    assert [b["subject"] for b in flagged] == [carol]
    assert flagged[0]["committee"]["outcome"] == "published"


def test_a_sampled_batch_passes_its_recompute_and_a_forged_one_is_flagged(
    swarm_round, chain, deployment, tmp_path
):
    """alice samples her batch with a stored adapter; bob stores the same kind of adapter but
    publishes hand-written answers under it. A committee that only re-scores accepts both; the
    audit recomputes every group: alice's pass, bob's were not sampled, a disagreement."""
    publish_all(swarm_round, sampled=["alice"], forged=["bob"])
    judge(swarm_round, honest_committee(swarm_round))
    config = write_config(tmp_path, chain, deployment, tmp_path / "store")
    result = run_audit(config, str(swarm_round.round))
    assert result.exit_code == EXIT_DISAGREE, result.output
    bob = swarm_round.address("bob")
    assert f"DISAGREEMENT on 1 batch(es), of peer(s) {bob}" in result.output
    assert (
        "own check flags it (provenance: its publisher's model did not sample it), the committee "
        "accepted it" in result.output
    )
    report = json.loads(run_audit(config, str(swarm_round.round), "--json").output)
    batches = {b["subject"]: b for b in report["receipt"]["batches"]}
    alice = batches[swarm_round.address("alice")]["own"]
    assert alice["decision"] == "agree"
    assert alice["provenance"].startswith("passed, 0 of 16 completions excluded")
    forged = batches[bob]["own"]
    assert (forged["decision"], forged["reason"], forged["agreed"]) == ("flag", "provenance", 0)
    assert forged["provenance"].startswith("provenance: not sampled from its adapter")
    others = [swarm_round.address(n) for n in ("carol", "dave")]
    assert all(batches[a]["own"]["provenance"].startswith("adapter_missing") for a in others)
    assert all(batches[a]["agrees"] for a in others)  # a missing adapter is shown, not judged


def test_a_round_still_being_judged_is_an_error(swarm_round, chain, deployment, tmp_path):
    publish_all(swarm_round)
    config = write_config(tmp_path, chain, deployment, tmp_path / "store")
    result = run_audit(config, str(swarm_round.round))
    assert result.exit_code == EXIT_ERROR
    assert "is not settled yet" in result.output and "audit it from round" in result.output


def test_a_store_without_the_batches_is_an_error(swarm_round, chain, deployment, tmp_path):
    publish_all(swarm_round)
    judge(swarm_round, honest_committee(swarm_round))
    config = write_config(tmp_path, chain, deployment, tmp_path / "empty-store")
    result = run_audit(config, str(swarm_round.round))
    assert result.exit_code == EXIT_ERROR
    assert "could not be fetched from the store" in result.output
    assert "Traceback" not in result.output


def test_the_leaderboard_is_compared_too(swarm_round, chain, deployment, tmp_path):
    from tests.indexer.test_api import caught_up, start_service

    publish_all(swarm_round, cheater="carol")
    judge(swarm_round, honest_committee(swarm_round))
    swarm_round.clients["alice"].settle(swarm_round.round, swarm_round.address("carol"))
    service = start_service(chain, deployment, tmp_path)
    try:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
        settings = AuditSettings(indexer_url=service.url)
        result = audit_round(
            swarm_round.clients["bob"],
            swarm_round.store,
            swarm_round.round,
            start_block=deployment.deployment_block,
            tokens=TOKENS,
        bases=BASES,
            settings=settings,
        )
    finally:
        service.stop()
    assert result.agrees, [b.disagreements for b in result.batches]
    carol = next(b for b in result.batches if b.subject == swarm_round.address("carol"))
    assert carol.leaderboard is not None and carol.leaderboard["outcome"] == "upheld"
    with pytest.raises(AuditError, match="unreachable"):
        audit_round(
            swarm_round.clients["bob"],
            swarm_round.store,
            swarm_round.round,
            start_block=deployment.deployment_block,
            tokens=TOKENS,
        bases=BASES,
            settings=settings,
        )


def test_the_receipt_says_pending_and_names_peers_without_a_raw_none(
    swarm_round, chain, deployment, tmp_path
):
    """carol's inflated batch is flagged and not settled yet (pending), and no committee member
    judged dave's batch (no verdict, no verified reward): the receipt says so in words, calls an
    address a peer or a voter, and prints no None."""
    from tests.indexer.test_api import caught_up, start_service

    publish_all(swarm_round, cheater="carol")
    dave = swarm_round.address("dave")
    ballots = {
        name: [item for item in items if item.subject != dave]
        for name, items in honest_committee(swarm_round).items()
    }
    judge(swarm_round, ballots)
    config = write_config(tmp_path, chain, deployment, tmp_path / "store")
    service = start_service(chain, deployment, tmp_path)
    try:
        head = chain.w3.eth.block_number
        wait_for(lambda: caught_up(service, head), what="the indexer to reach the head")
        result = run_audit(config, str(swarm_round.round), "--indexer", service.url)
    finally:
        service.stop()
    assert result.exit_code == EXIT_AGREE, result.output
    assert "None" not in result.output
    blocks = _blocks(result.output)
    carol = blocks[swarm_round.address("carol")]
    assert "outcome pending (flagged, not settled yet)" in carol
    assert "  leaderboard pending (outcome not settled yet), verified so far " in carol
    assert "    flag  by voter 0x" in carol
    unjudged = blocks[dave]
    assert "  committee   no verdict counted: agree 0" in unjudged
    assert "outcome not disputed (nobody flagged)" in unjudged
    assert (
        "  leaderboard outcome not disputed (nobody flagged), verified none (no committee "
        "verdict counted)" in unjudged
    )
    for name in ("alice", "bob"):
        assert (
            "  leaderboard outcome not disputed (nobody flagged), verified "
            in (blocks[swarm_round.address(name)])
        )


def _blocks(output: str) -> dict[str, str]:
    """The receipt's lines per batch, by the peer named on its first line."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("batch of peer "):
            current = blocks.setdefault(line.split()[3].rstrip(","), [])
        if current is not None:
            current.append(line)
    return {peer: "\n".join(lines) for peer, lines in blocks.items()}
