"""A command whose output goes away (a reader that closes early, a closed terminal) or whose
terminal sends SIGHUP: ``node.output.Output`` and ``StopSignal``, in real subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from tests.chain_fixtures import ChainControl
from tests.integration.swarm import published_digest
from tests.integration.test_swarm_run import PASSWORD, volunteer  # noqa: F401 - a fixture
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

WRITER = """
import sys
from pathlib import Path
from node.output import Output
marker = Path(sys.argv[1])
out = Output(on_lost=lambda: marker.write_text(marker.read_text() + "lost\\n"))
marker.write_text("")
for i in range(2000):
    out.echo(f"line {i} " + "x" * 100)
marker.write_text(marker.read_text() + "finished\\n")
"""

SIGHUP = """
import os, signal
from node.round.loop import StopSignal
stop = StopSignal()
stop.install(lambda message: print(message, flush=True))
os.kill(os.getpid(), signal.SIGHUP)
print("requested" if stop.requested else "not requested", flush=True)
"""


def test_a_reader_that_closes_early_is_noticed_once_and_the_writer_finishes(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(marker)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None and writer.stderr is not None
    assert writer.stdout.readline().startswith(b"line 0 ")
    writer.stdout.close()  # `| head -1`
    stderr = writer.stderr.read().decode()
    assert writer.wait(timeout=60) == 0, stderr
    assert stderr == ""  # no BrokenPipeError, no "Exception ignored" at exit
    assert marker.read_text() == "lost\nfinished\n"


def test_sighup_is_a_stop_request() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SIGHUP],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "stopping after the current step (Ctrl-C again to abort now)",
        "requested",
    ]


def test_swarm_run_whose_output_goes_away_finishes_its_rounds(
    volunteer: tuple[Path, LocalAccount],  # noqa: F811 - the imported fixture
    chain: ChainControl,
    tmp_path: Path,
) -> None:
    """``swarm run | head -1``: the node logs on (to nowhere) and does its rounds, state saved."""
    config, account = volunteer
    client = CoordinatorClient(chain.w3, chain.deployment.coordinator)
    round_ = chain.current_round() + 1
    chain.warp_to_round(round_)
    with (tmp_path / "stderr").open("wb") as stderr:
        node = subprocess.Popen(
            [sys.executable, "-m", "node.cli", "--config", str(config), "run", "--rounds", "2"],
            cwd=REPO,
            env={**os.environ, "SWARM_PW": PASSWORD, "SWARM_MODEL_CACHE": str(tmp_path / "c")},
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    try:
        assert node.stdout is not None
        assert node.stdout.readline().startswith(b"peer ")
        node.stdout.close()  # the reader is gone before the node's first round
        for current in (round_, round_ + 1):
            wait_for(
                lambda r=current: published_digest(client, r, account.address) is not None,
                timeout=120,
                what=f"round {current} published",
            )
            chain.warp_to_round(current + 1)
        assert node.wait(timeout=120) == 0, (tmp_path / "stderr").read_text()
    finally:
        if node.poll() is None:
            node.kill()
    assert "Traceback" not in (tmp_path / "stderr").read_text()
    assert (tmp_path / "node" / "round-state.json").exists()
