"""``KuboStore``: blobs as raw IPFS blocks through a Kubo daemon's RPC API.

Three RPC calls (all POST, as Kubo requires), each given Kubo's own ``timeout`` option too so
the daemon stops searching the network when the client gives up:

    block/put?cid-codec=raw&mhtype=sha2-256&mhlen=32[&pin=true]  (multipart) -> {"Key": cid}
    block/get?arg=<cid>                                                 -> the raw bytes
    pin/add?arg=<cid>&recursive=true                                    -> {"Pins": [cid]}

plus ``block/stat?arg=<cid>&offline=true`` for ``has`` (local presence only). With codec raw and
sha2-256 the block's CID is exactly ``cid_from_digest(sha256(data))``; ``put`` checks the CID
Kubo reports and ``get`` re-hashes every byte it receives: the daemon is never trusted.

``ipfshttpclient.Client`` is constructed directly: its ``connect()`` refuses every Kubo newer
than 0.8. Its high-level ``block`` and ``pin`` sections pass the options above through
``opts``. ``get`` streams the answer and stops at the size cap and at an overall deadline.
A block the daemon cannot find (it searches the network) ends as a timeout, i.e. the retryable
StoreTimeout; a daemon in offline mode answers "not found", i.e. NotFound. Kubo refuses blocks
over 1 MiB unless started with ``--allow-big-block``; keep ``max_blob_size`` at 1 MiB or less (a
``get`` with a larger ``max_size`` still reads a bigger block that a daemon holds).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import time
import urllib.parse
import warnings
from collections.abc import Iterator
from typing import Any

import ipfshttpclient
import requests
import urllib3
from ipfshttpclient import exceptions as ipfs_errors

from node.storage.base import DEFAULT_MAX_BLOB_SIZE, ContentStore, check_digest, sha256, verified
from node.storage.cid import cid_from_digest
from node.storage.errors import (
    DigestMismatch,
    NotFound,
    StoreError,
    StoreRejected,
    StoreTimeout,
    StoreUnavailable,
    TooLarge,
)

DEFAULT_TIMEOUT = 30.0
_NOT_FOUND = ("not found", "could not find", "no such block")
_TIMED_OUT = ("deadline exceeded", "timed out")
_TOO_BIG = ("over 1mib", "too big", "too large")

# ipfshttpclient 0.7 passes urllib3 a `strict` argument that urllib3 2 only warns about.
warnings.filterwarnings("ignore", "The 'strict' parameter is no longer needed", FutureWarning)


class KuboStore(ContentStore):
    """Raw blocks on the Kubo daemon whose RPC API is at ``api_url`` (``http://host:5001``)."""

    def __init__(
        self,
        api_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_blob_size: int = DEFAULT_MAX_BLOB_SIZE,
    ) -> None:
        self.api_url = api_url
        self.timeout = timeout
        self.max_blob_size = max_blob_size
        address, base = api_multiaddr(api_url)
        self._client = ipfshttpclient.Client(addr=address, base=base, timeout=timeout)

    def __repr__(self) -> str:
        return f"KuboStore({self.api_url!r})"

    def close(self) -> None:
        """Closes the client's connection pool (if one is open)."""
        self._client.close()

    def put(self, data: bytes, *, pin: bool = False) -> bytes:
        data = self._blob_to_put(data)
        digest = sha256(data)
        expected = cid_from_digest(digest)
        options = {"cid-codec": "raw", "mhtype": "sha2-256", "mhlen": "32", **self._deadline()}
        if pin:
            options["pin"] = "true"
        with self._errors(f"block/put of {expected}"):
            answer = self._client.block.put(io.BytesIO(data), opts=options)
        key = _field(answer, "Key")
        if key != expected:
            raise DigestMismatch(
                f"{self.api_url} stored the block as {key!r}, expected {expected}: is the daemon "
                "a Kubo old enough to ignore cid-codec=raw?"
            )
        return digest

    def get(self, digest: bytes, *, max_size: int | None = None) -> bytes:
        cap = self._read_cap(max_size)
        cid = cid_from_digest(check_digest(digest))
        deadline = time.monotonic() + self.timeout
        chunks: list[bytes] = []
        received = 0
        with self._errors(f"block/get of {cid}"):
            stream = self._client.block.get(cid, opts=self._deadline(), stream=True)
            with stream:
                for chunk in stream:
                    received += len(chunk)
                    if received > cap:
                        raise TooLarge(f"{self.api_url} sent more than {cap} bytes for {cid}")
                    if time.monotonic() > deadline:
                        raise StoreTimeout(f"{self.api_url} took over {self.timeout}s for {cid}")
                    chunks.append(chunk)
        return verified(digest, b"".join(chunks), source=f"Kubo at {self.api_url}")

    def has(self, digest: bytes) -> bool:
        cid = cid_from_digest(check_digest(digest))
        try:
            with self._errors(f"block/stat of {cid}"):
                self._client.block.stat(cid, opts=self._deadline(), offline=True)
        except NotFound:
            return False
        return True

    def pin(self, digest: bytes) -> None:
        cid = cid_from_digest(check_digest(digest))
        with self._errors(f"pin/add of {cid}"):
            answer = self._client.pin.add(cid, opts=self._deadline())
        pins = _field(answer, "Pins")
        if not isinstance(pins, list) or cid not in [str(pin) for pin in pins]:
            raise StoreRejected(f"{self.api_url} answered pin/add of {cid} with {pins!r}")

    def _deadline(self) -> dict[str, str]:
        return {"timeout": f"{max(1, round(self.timeout * 1000))}ms"}  # a Go duration

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Maps ipfshttpclient/requests/socket errors onto the store's family."""
        where = f"{doing} on {self.api_url}"
        try:
            yield
        except StoreError:
            raise
        except ipfs_errors.TimeoutError as error:
            raise StoreTimeout(f"{where}: no answer in {self.timeout}s") from error
        except ipfs_errors.StatusError as error:
            raise _status_error(where, error) from error
        except ipfs_errors.Error as error:  # connection, protocol, decoding
            raise StoreUnavailable(f"{where}: {error}") from error
        except requests.exceptions.RequestException as error:  # raised while streaming
            if _is_timeout(error):
                raise StoreTimeout(f"{where}: no data for {self.timeout}s") from error
            raise StoreUnavailable(f"{where}: {error}") from error
        except OSError as error:
            raise StoreUnavailable(f"{where}: {error}") from error


def _status_error(where: str, error: ipfs_errors.StatusError) -> StoreError:
    """An HTTP error answer -> NotFound, StoreTimeout, StoreRejected or StoreUnavailable."""
    response = getattr(error.original, "response", None)
    status = getattr(response, "status_code", None)
    # Only Kubo's own error message is classified (the HTTPError text repeats the URL).
    kubo_message = str(error).lower() if isinstance(error, ipfs_errors.ErrorResponse) else ""
    detail = f"{where}: HTTP {status}: {str(error)[:300]}"
    if any(words in kubo_message for words in _NOT_FOUND):
        return NotFound(detail)
    if any(words in kubo_message for words in _TIMED_OUT):
        return StoreTimeout(detail)
    if any(words in kubo_message for words in _TOO_BIG):
        return TooLarge(detail)
    if status is not None and 400 <= status < 500 and status not in (408, 429):
        return StoreRejected(detail)
    return StoreUnavailable(detail)


def _is_timeout(error: BaseException) -> bool:
    """Whether a requests error is (or wraps) a timeout: requests re-raises urllib3's read
    timeout during streaming as a plain ConnectionError."""
    if isinstance(error, requests.exceptions.Timeout):
        return True
    return any(isinstance(arg, urllib3.exceptions.TimeoutError) for arg in error.args)


def _field(answer: Any, name: str) -> Any:
    try:
        return answer[name]
    except (KeyError, TypeError, IndexError):
        raise StoreRejected(f"unexpected answer from Kubo (no {name!r}): {answer!r:.300}") from None


def api_multiaddr(api_url: str) -> tuple[str, str]:
    """``http://127.0.0.1:5001[/api/v0]`` -> (``/ip4/127.0.0.1/tcp/5001/http``, ``api/v0``)."""
    parts = urllib.parse.urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a Kubo RPC API URL looks like http://127.0.0.1:5001, got {api_url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"bad port in {api_url!r}") from None
    host = parts.hostname
    try:
        ip = ipaddress.ip_address(host)
        protocol = "ip4" if ip.version == 4 else "ip6"
    except ValueError:
        protocol = "dns"
    base = parts.path.strip("/") or "api/v0"
    return f"/{protocol}/{host}/tcp/{port}/{parts.scheme}", base
