"""``swarm local up`` checks what it needs before it starts anything: a taken port the user asked
for is one line, with no chain started, no contract deployed and no peer funded."""

from __future__ import annotations

import socket
from pathlib import Path

from click.testing import CliRunner

from node.cli import main


def test_a_taken_indexer_port_is_refused_before_the_chain_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            main,
            ["local", "up", "--workdir", str(tmp_path / "demo"), "--indexer-port", str(port)],
        )
    assert result.exit_code == 1
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("Error: ") and f"port {port} for the leaderboard is taken" in line
    assert "anvil on" not in result.output and "deploying" not in result.output
    assert not (tmp_path / "demo" / "anvil.log").exists()
