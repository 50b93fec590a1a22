"""The table of a volunteer's common mistakes, each run as the real ``swarm`` command in a
subprocess (what a terminal shows): the answer is one ``Error:`` line that says what to do, no
traceback on the terminal (it goes to the error log), retries are one line each in one format,
and ``swarm run`` refuses before it loads a model."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from node.chain.deployment import Deployment
from node.identity import create_keystore
from tests.chain_fixtures import AnvilNode

pytestmark = pytest.mark.integration

SWARM = Path(sys.executable).parent / "swarm"
PASSWORD = "volunteer-password"
#: A retry line: time, level, what failed and why, which retry of how many, after how long.
RETRY_LINE = re.compile(r"^\d\d:\d\d:\d\d WARNING .+ failed \(.+\); retry \d+ of \d+ in [\d.]+ s$")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Home:
    """A volunteer's folder: node.toml, a deployment file, maybe a keystore."""

    path: Path
    anvil: AnvilNode
    deployment: Deployment

    def write(self, *, rpc_url: str | None = None, deployment: Path | None = None) -> None:
        deployment = deployment or self.deployment.save(self.path / "deployment.json")
        (self.path / "node.toml").write_text(
            f'[chain]\nrpc_url = "{rpc_url or self.anvil.url}"\ndeployment = "{deployment}"\n\n'
            f'[identity]\nkeystore = "{self.path / "keystore.json"}"\n'
            'password_env = "TEST_SWARM_PW"\n\n'
            f'[model]\nsource = "tiny"\ncheckpoint_dir = "{self.path / "state"}"\n\n'
            f'[storage]\nstore = "{self.path / "store"}"\n'
        )

    def keystore(self) -> None:
        create_keystore(self.path / "keystore.json", PASSWORD)


def no_scheme(home: Home) -> None:
    home.write(rpc_url=home.anvil.url.removeprefix("http://"))
    home.keystore()


def unreachable(home: Home) -> None:
    home.write(rpc_url=f"http://127.0.0.1:{closed_port()}")
    home.keystore()


def wrong_chain(home: Home) -> None:
    record = json.loads(home.deployment.model_dump_json(by_alias=True))
    record["chain_id"] = 5
    other = home.path / "goerli.json"
    other.write_text(json.dumps(record))
    home.write(deployment=other)
    home.keystore()


def no_keystore(home: Home) -> None:
    home.write()


def corrupt_keystore(home: Home) -> None:
    home.write()
    (home.path / "keystore.json").write_text('{"address": "70997970c51812dc3a010c7d01b50e0d17dc')


def plain_setup(home: Home) -> None:
    home.write()
    home.keystore()


@dataclass(frozen=True)
class Mistake:
    name: str
    setup: Callable[[Home], None]
    args: tuple[str, ...]
    says: tuple[str, ...]  # parts of the one error line
    password: str | None = PASSWORD
    retries: bool = False
    logged: bool = True  # False: the command itself finds the mistake; there is no traceback


MISTAKES = [
    Mistake("rpc url without scheme", no_scheme, ("status",), ("has no scheme", "write http://")),
    Mistake("rpc url without scheme, run", no_scheme, ("run",), ("has no scheme",)),
    Mistake(
        "unreachable rpc",
        unreachable,
        ("status",),
        ("is unreachable (connection refused", "check [chain] rpc_url"),
        retries=True,
    ),
    Mistake("unreachable rpc, run", unreachable, ("run",), ("is unreachable",), retries=True),
    Mistake(
        "rpc of another chain",
        wrong_chain,
        ("register", "--name", "alice", "--stake", "1"),
        ("serves chain 31337", "set [chain] rpc_url to an RPC of chain 5"),
    ),
    Mistake(
        "no terminal, no password",
        no_keystore,
        ("init",),
        ("no terminal",),
        password=None,
        logged=False,
    ),
    Mistake("no keystore", no_keystore, ("status",), ("no keystore at", "swarm init")),
    Mistake("no keystore, run", no_keystore, ("run",), ("no keystore at", "swarm init")),
    Mistake(
        "corrupt keystore",
        corrupt_keystore,
        ("status",),
        ("is not a usable keystore (it is not JSON)", "restore the file from your backup"),
    ),
    Mistake(
        "corrupt keystore, register",
        corrupt_keystore,
        ("register", "--name", "alice", "--stake", "1"),
        ("is not a usable keystore",),
    ),
    Mistake(
        "wrong password",
        plain_setup,
        ("register", "--name", "alice", "--stake", "1"),
        ("wrong password for", "the password file or environment variable"),
        password="not-the-password",
    ),
    Mistake(
        "run before registering",
        plain_setup,
        ("run", "--rounds", "1"),
        ("is not registered on this coordinator", "swarm register --name NAME --stake AMOUNT"),
    ),
]


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.name)
def test_a_mistake_is_one_line_that_says_what_to_do(
    mistake: Mistake, tmp_path: Path, anvil: AnvilNode, deployment: Deployment
) -> None:
    home = Home(tmp_path, anvil, deployment)
    mistake.setup(home)
    error_log = tmp_path / "errors.log"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SWARM_ERROR_LOG": str(error_log)}
    if mistake.password is not None:
        env["TEST_SWARM_PW"] = mistake.password
    result = subprocess.run(
        [str(SWARM), "--config", str(tmp_path / "node.toml"), *mistake.args],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    shown = result.stdout + result.stderr
    assert result.returncode == 1, shown
    assert "Traceback" not in shown and "Warning:" not in shown, shown
    lines = [line for line in shown.splitlines() if line]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], shown
    for part in mistake.says:
        assert part in errors[0], errors[0]
    retries = lines[:-1]
    assert all(RETRY_LINE.match(line) for line in retries), retries
    assert len(retries) == (4 if mistake.retries else 0), retries
    assert all(len(line) <= 300 for line in lines), lines
    if mistake.logged:
        assert "Traceback" in error_log.read_text(), "the traceback goes to the error log"
