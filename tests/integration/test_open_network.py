"""The open network: separate ``swarm run`` processes in real time, each on its own Kubo daemon,
finding each other's stores through the chain (real Anvil mining 1 s blocks, real daemons, the
tiny model with the answering learner). Bounded in time: a few rounds of 12 s each."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from node.policy.model import BaseModel
from tests.integration.open_network import OpenSwarm
from tests.integration.process_tree import descendants, wait_gone
from tests.integration.swarm import published_digest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

ROUND_SECONDS = 12
STARTUP_SECONDS = 90  # torch and transformers load in every process, on 2 shared cores
ETHER = 10**18


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory, tiny_base: BaseModel) -> Path:
    """A model cache holding the shipped tokenizer (the tiny model's), linked into each node's."""
    cache = tmp_path_factory.mktemp("model-cache")
    tiny_base.tokenizer.save_pretrained(cache / "smollm2-135m")
    return cache


@contextmanager
def _swarm(tmp_path: Path, shared_cache: Path, **settings: int) -> Iterator[OpenSwarm]:
    swarm = OpenSwarm(tmp_path / "swarm", shared_cache, round_seconds=ROUND_SECONDS, **settings)
    try:
        yield swarm
    finally:
        swarm.close()


def _external_groups(log: str) -> int:
    return sum(int(n) for n in re.findall(r"\+ (\d+) external", log))


def test_honest_processes_share_and_a_cheater_is_slashed(
    tmp_path: Path, shared_cache: Path
) -> None:
    # Verdicts on round r are revealed in r + 4 and settled from r + 6 (g=1, c=2, v=2).
    rounds = 9
    with _swarm(tmp_path, shared_cache, nodes=4, rounds=rounds) as swarm:
        honest = [0, 1, 2]
        for i in honest:
            swarm.start(i)
        swarm.start(3, node="inflating")
        swarm.wait_all(timeout=STARTUP_SECONDS + (rounds + 3) * ROUND_SECONDS)

        for i in honest:
            assert len(swarm.rounds_of(i)) == rounds, swarm.tail()
        # the cheater's process stops once slashed below the minimum stake (it may not publish)
        assert "stake 0.9 ETH is below the minimum 1 ETH" in swarm.node_log(3)
        attested = swarm.attested()
        for i in honest:
            for j in honest:
                if i != j:
                    verdicts = [
                        a
                        for a in attested
                        if a.attester == swarm.address(i) and a.subject == swarm.address(j)
                    ]
                    assert len(verdicts) >= rounds - 6, (i, j, swarm.tail())
                    assert not any(a.is_flag for a in verdicts)
            flags = [
                a
                for a in attested
                if a.attester == swarm.address(i) and a.subject == swarm.address(3)
            ]
            assert flags and all(a.is_flag for a in flags), (i, swarm.tail())
            assert _external_groups(swarm.node_log(i)) > 0, swarm.node_log(i)
        cheater = swarm.address(3)
        assert any(s.subject == cheater and s.slashed for s in swarm.settled()), swarm.tail()
        assert swarm.client.peer_info(cheater).stake < 1 * ETHER
        assert all(swarm.client.peer_info(swarm.address(i)).stake == ETHER for i in honest)


def test_a_late_joiner_a_killed_node_and_a_lost_daemon(tmp_path: Path, shared_cache: Path) -> None:
    # The joiner's second round r (it joins a round or two late) is revealed in r + 4 (g=1, c=2,
    # v=2): the others must still run then.
    rounds = 9
    with _swarm(tmp_path, shared_cache, nodes=3, rounds=rounds) as swarm:
        for i in range(3):
            swarm.start(i)
        swarm.wait_until(
            lambda: all(swarm.rounds_of(i) for i in range(3)), STARTUP_SECONDS, "first batches"
        )

        # a late joiner registers mid-run
        joiner = swarm.add_peer()
        swarm.start(3)

        # kill -9 of node 1 right after it published, and a restart
        killed_in = swarm.rounds_of(1)[-1]
        swarm.kill(1)
        swarm.start(1)

        # node 2's daemon dies right after node 2 publishes, for more than a round
        node2 = swarm.address(2)
        outage = swarm.current_round() + 1
        swarm.wait_until(
            lambda: published_digest(swarm.client, outage, node2) is not None,
            3 * ROUND_SECONDS,
            "node 2's batch of the outage round",
            poll=0.05,
        )
        swarm.restart_daemon(
            2,
            lambda: swarm.wait_until(
                lambda: swarm.current_round() > outage + 1, 3 * ROUND_SECONDS, "the outage"
            ),
        )
        swarm.wait_all(timeout=STARTUP_SECONDS + (rounds + 4) * ROUND_SECONDS)

        pairs = [(e.round, e.peer) for e in swarm.published()]
        assert len(pairs) == len(set(pairs))
        node1 = swarm.rounds_of(1)
        assert len(node1) >= rounds and max(node1) > killed_in + 1, swarm.tail()
        assert "Traceback" not in swarm.node_log(1)

        attested = swarm.attested()
        assert not any(a.subject == node2 and a.is_flag for a in attested), swarm.tail()
        # With its daemon gone for all of round outage + 1, node 2 could not store its batch
        # while the daemon was down (it may still publish it late, in the grace window, once the
        # daemon is back), and nobody flagged it. Whether a peer fetched the batch of round
        # `outage` before the daemon died is a race; peers that did not logged it as
        # fetch_failed/fetch_timeout, which is never voted on.
        assert re.search(
                rf"storing (the adapter of )?round {outage + 1} failed", swarm.node_log(2)
            ), swarm.tail()
        assert max(swarm.rounds_of(2)) > outage + 1, swarm.tail()  # it recovered

        joined = swarm.rounds_of(3)
        assert len(joined) == rounds, swarm.tail()
        agreed_by = {
            (a.round, a.attester)
            for a in attested
            if a.subject == joiner.account.address and a.round > joined[0] and not a.is_flag
        }
        assert any(sum(1 for r, _ in agreed_by if r == round_) >= 2 for round_ in joined[1:]), (
            swarm.tail()
        )


def _local_up(workdir: Path, shared_cache: Path) -> subprocess.Popen[str]:
    command = [
        str(Path(sys.executable).with_name("swarm")),
        "local", "up", "--processes", "--model", "tiny", "--nodes", "2", "--rounds", "50",
        "--round-seconds", str(ROUND_SECONDS), "--anvil-port", "0", "--no-indexer",
        "--workdir", str(workdir),
    ]  # fmt: skip
    env = {"SWARM_MODEL_CACHE": str(shared_cache), "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def _read_until_rounds(process: subprocess.Popen[str], count: int) -> list[str]:
    """The output until ``count`` node round lines have been printed."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + STARTUP_SECONDS + 3 * ROUND_SECONDS
    while time.monotonic() < deadline:
        lines.append(process.stdout.readline())
        if sum(1 for x in lines if re.match(r"node-\d \| round \d+: published yes", x)) >= count:
            return lines
    raise AssertionError("".join(lines))


def test_swarm_local_up_processes_runs_and_stops_cleanly(
    tmp_path: Path, shared_cache: Path
) -> None:
    """The command itself: nodes' lines in one terminal, a summary, and Ctrl-C stops it all."""
    workdir = tmp_path / "local"
    process = _local_up(workdir, shared_cache)
    try:
        lines = _read_until_rounds(process, 3)
        children = descendants(process.pid)
        assert len(children) >= 5  # Anvil, two daemons, two node processes
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    output = "".join(lines) + rest
    assert process.returncode == 0, output
    assert "node-0 | round" in output and "node-1 | round" in output
    assert re.search(r"node-0: \d+ rounds published", output), output
    assert "local swarm stopped" in output
    assert wait_gone(children) == set()  # no node process, daemon or chain left behind
    assert not (workdir / "store").exists()  # each node had its own daemon, no shared folder


def test_kill_9_of_swarm_local_up_takes_every_child_down(
    tmp_path: Path, shared_cache: Path
) -> None:
    workdir = tmp_path / "killed"
    process = _local_up(workdir, shared_cache)
    try:
        _read_until_rounds(process, 1)
        children = descendants(process.pid)
        assert len(children) >= 5  # Anvil, two daemons, two node processes
        process.kill()
        process.wait()
        assert wait_gone(children) == set()
    finally:
        if process.poll() is None:
            process.kill()
