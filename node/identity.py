"""A volunteer's identity: one secp256k1 key in an encrypted keystore file (Web3 Secret Storage v3).

The key is created once (``create_keystore``), encrypted with a password (scrypt KDF, AES-128-CTR,
the format every Ethereum wallet reads) and written with owner-only permissions; it is decrypted in
memory when the node starts (``unlock_keystore``). The password comes from an environment variable,
a file, or a prompt: never from the command line, and it is never logged. Nothing here prints the
private key.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address

PASSWORD_ENV = "SWARM_KEYSTORE_PASSWORD"
MIN_PASSWORD_LENGTH = 8
# scrypt's standard cost (n = 2**18) takes ~1 s and 256 MiB per unlock; a node unlocks once.
SCRYPT_N = 2**18


class IdentityError(RuntimeError):
    """The keystore cannot be created or unlocked; the message says what to do."""


def create_keystore(
    path: Path, password: str, *, overwrite: bool = False, kdf_n: int = SCRYPT_N
) -> str:
    """Creates a new key, writes it encrypted to ``path`` (mode 0600), returns its address."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise IdentityError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    if path.exists() and not overwrite:
        raise IdentityError(
            f"{path} already holds a keystore: keep it (it is your peer's identity and stake), or "
            "choose another path"
        )
    account = Account.create()
    document = Account.encrypt(account.key, password, kdf="scrypt", iterations=kdf_n)
    _write_private(path, json.dumps(document, indent=2).encode())
    return account.address


def keystore_address(path: Path) -> str:
    """The checksummed address stored (unencrypted) in a keystore file."""
    document = _read_document(path)
    address = document.get("address")
    if not isinstance(address, str):
        raise IdentityError(_damaged(path, "it has no address field"))
    return to_checksum_address("0x" + address.removeprefix("0x"))


def unlock_keystore(path: Path, password: str) -> LocalAccount:
    """The account in ``path``; IdentityError for a wrong password or a damaged file."""
    document = _read_document(path)
    try:
        key = Account.decrypt(document, password)
    except ValueError as exc:
        if "MAC mismatch" in str(exc):
            raise IdentityError(
                f"wrong password for {path}: set the one it was created with "
                "(the password file or environment variable of [identity])"
            ) from None
        raise IdentityError(_damaged(path, str(exc))) from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise IdentityError(_damaged(path, f"missing or bad {exc}")) from None
    return Account.from_key(key)


def read_password(*, env: str = PASSWORD_ENV, file: Path | None = None) -> str | None:
    """The password from ``file`` (first line) or the environment variable ``env``; None if neither."""
    if file is not None:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise IdentityError(f"cannot read the password file {file}: {exc.strerror}") from None
        return lines[0] if lines else ""
    return os.environ.get(env)


def _read_document(path: Path) -> dict:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IdentityError(f"no keystore at {path}: create one with `swarm init`") from None
    except IsADirectoryError:
        raise IdentityError(
            f"{path} is a folder: set [identity] keystore to the key's file"
        ) from None
    except OSError as exc:
        raise IdentityError(f"cannot read the keystore {path}: {exc.strerror}") from None
    except ValueError:
        raise IdentityError(_damaged(path, "it is not JSON")) from None
    if not isinstance(document, dict):
        raise IdentityError(_damaged(path, "it is not a JSON object"))
    return document


def _damaged(path: Path, why: str) -> str:
    return (
        f"{path} is not a usable keystore ({why}): restore the file from your backup; without "
        "one, `swarm init --force` makes a new key (a new address: stake stays with the old one)"
    )


def _write_private(path: Path, data: bytes) -> None:
    """Atomically writes ``data`` readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=".keystore-", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:  # mkstemp creates it with mode 0600
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(staging, path)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
