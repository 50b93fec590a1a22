"""The encrypted keystore: create, read the address, unlock, and every way it can go wrong."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from node.identity import (
    IdentityError,
    create_keystore,
    keystore_address,
    read_password,
    unlock_keystore,
)

FAST_KDF = 2**10  # the real cost (2**18) is exercised once below; the rest stay quick
PASSWORD = "correct horse battery"


def test_created_keystore_unlocks_to_its_address(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "node.json"
    address = create_keystore(path, PASSWORD, kdf_n=FAST_KDF)
    assert keystore_address(path) == address
    account = unlock_keystore(path, PASSWORD)
    assert account.address == address
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert account.key.hex() not in path.read_text()  # encrypted, not stored in clear


def test_default_cost_keystore_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    address = create_keystore(path, PASSWORD)
    assert json.loads(path.read_text())["crypto"]["kdfparams"]["n"] == 2**18
    assert unlock_keystore(path, PASSWORD).address == address


def test_wrong_password_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    create_keystore(path, PASSWORD, kdf_n=FAST_KDF)
    with pytest.raises(IdentityError, match="wrong password"):
        unlock_keystore(path, PASSWORD + "!")


def test_existing_keystore_is_never_overwritten_by_default(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    first = create_keystore(path, PASSWORD, kdf_n=FAST_KDF)
    with pytest.raises(IdentityError, match="already holds a keystore"):
        create_keystore(path, PASSWORD, kdf_n=FAST_KDF)
    assert keystore_address(path) == first
    second = create_keystore(path, PASSWORD, overwrite=True, kdf_n=FAST_KDF)
    assert second != first and keystore_address(path) == second


@pytest.mark.parametrize("content", ["", "not json", "[1, 2]", '{"address": 5}'])
def test_damaged_keystore_is_a_clear_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "node.json"
    path.write_text(content)
    with pytest.raises(IdentityError):
        keystore_address(path)
    with pytest.raises(IdentityError):
        unlock_keystore(path, PASSWORD)


def test_missing_keystore_points_to_swarm_init(tmp_path: Path) -> None:
    with pytest.raises(IdentityError, match="swarm init"):
        unlock_keystore(tmp_path / "absent.json", PASSWORD)


def test_short_password_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IdentityError, match="at least 8"):
        create_keystore(tmp_path / "node.json", "short", kdf_n=FAST_KDF)
    assert not (tmp_path / "node.json").exists()


def test_password_from_file_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWARM_KEYSTORE_PASSWORD", raising=False)
    assert read_password() is None
    monkeypatch.setenv("SWARM_KEYSTORE_PASSWORD", "from-env-123")
    assert read_password() == "from-env-123"
    secret = tmp_path / "password.txt"
    secret.write_text("from-file-123\nignored second line\n")
    assert read_password(file=secret) == "from-file-123"  # a file wins over the environment
    with pytest.raises(IdentityError, match="cannot read the password file"):
        read_password(file=tmp_path / "absent.txt")
