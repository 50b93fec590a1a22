"""A throwaway PostgreSQL server for the tests, started from the installed binaries (Debian's
``postgresql`` package: initdb and pg_ctl on PATH or under /usr/lib/postgresql/<version>/bin).

The server lives in a temporary directory, listens on 127.0.0.1 on a free port with trust
authentication, and is stopped and deleted after the session. PostgreSQL refuses to run as root,
so as root it runs as the ``postgres`` system user the package creates (via ``runuser``). When
the binaries are missing, ``postgres_url`` skips the tests that need it, saying why.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.local.anvil import free_port


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def _as_server_user() -> tuple[list[str], int | None]:
    """The command prefix that runs a program as a user PostgreSQL accepts, and its uid."""
    if os.geteuid() != 0:
        return [], None
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("running as root and runuser is missing (needed to start PostgreSQL)")
    return [runuser, "-u", "postgres", "--"], user.pw_uid


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of the session's PostgreSQL server (database ``postgres``, user ``postgres``)."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip(
            "PostgreSQL is not installed (no initdb/pg_ctl on PATH or under "
            "/usr/lib/postgresql/*/bin): apt-get install postgresql to run the Postgres tests"
        )
    prefix, uid = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="swarm-indexer-pg-"))
    data = root / "data"
    if uid is not None:
        os.chown(root, uid, -1)
    port = free_port()
    log = root / "server.log"

    def run(*command: str) -> None:
        result = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, timeout=120, cwd=root
        )
        if result.returncode != 0:
            log_text = log.read_text(errors="replace") if log.exists() else ""
            pytest.fail(
                f"{command[0]} failed: {result.stdout}{result.stderr}{log_text}", pytrace=False
            )

    try:
        run(initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        run(
            pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "60",
            "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                cwd=root,
            )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty database on the session's server, dropped after the test."""
    import psycopg

    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield postgres_server.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
