"""``KuboStore``: blobs as raw IPFS blocks through a Kubo daemon's RPC API.

The RPC calls (all POST, as Kubo requires), each given Kubo's own ``timeout`` option too so the
daemon stops searching when the client gives up:

    block/put?cid-codec=raw&mhtype=sha2-256&mhlen=32[&pin=true]  (multipart) -> {"Key": cid}
    block/get?arg=<cid>                                                 -> the raw bytes
    block/stat?arg=<cid>&offline=true                                   -> {"Key", "Size"} (has)
    pin/add?arg=<cid>                                                   -> {"Pins": [cid]}
    id                                                  -> {"ID": peer id, "Addresses": [...]}
    swarm/connect?arg=<addr>/p2p/<id>&arg=...                           -> {"Strings": [...]}
    key/sign?ipns-base=b58mh  (multipart message)   -> {"Key": {"Id", "Name"}, "Signature": "u..."}

With codec raw and sha2-256 the block's CID is exactly ``cid_from_digest(sha256(data))``; ``put``
checks the CID Kubo reports and ``get`` re-hashes every byte it receives: the daemon is never
trusted. ``get`` streams the answer and stops at the size cap and at an overall deadline.

A block the daemon does not hold is fetched over bitswap from the peers it is connected to
(``connect``; a private swarm runs with ``Routing.Type = "none"``, node/local/kubo.py); if none
has it, Kubo answers "context deadline exceeded" at the ``timeout`` given, i.e. the retryable
StoreTimeout. A daemon in offline mode answers "not found", i.e. NotFound. Kubo refuses blocks
over 1 MiB unless started with ``--allow-big-block``; keep ``max_blob_size`` at 1 MiB or less (a
``get`` with a larger ``max_size`` still reads a bigger block that a daemon holds).

Plain ``requests``, not ipfshttpclient 0.7 (the last release, 2021): its ``connect()`` refuses
every Kubo newer than 0.8, its ``swarm.connect`` sends each character of the address as an
argument (it iterates ``address`` instead of ``addresses``), and it passes urllib3 2 a ``strict``
argument that raises a FutureWarning on every connection. These seven calls need none of it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter

from node.storage.base import DEFAULT_MAX_BLOB_SIZE, ContentStore, check_digest, sha256, verified
from node.storage.cid import cid_from_digest
from node.storage.endpoint import StoreEndpoint
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
_CHUNK = 65536
_POOL_SIZE = 32  # connections kept for concurrent calls


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
        self._base = api_base(api_url)
        self._session = _session()

    def __repr__(self) -> str:
        return f"KuboStore({self.api_url!r})"

    def close(self) -> None:
        """Closes the connection pool."""
        self._session.close()

    def put(self, data: bytes, *, pin: bool = False) -> bytes:
        data = self._blob_to_put(data)
        digest = sha256(data)
        expected = cid_from_digest(digest)
        options = {"cid-codec": "raw", "mhtype": "sha2-256", "mhlen": "32"}
        if pin:
            options["pin"] = "true"
        files = {"file": ("block", data, "application/octet-stream")}
        with self._errors(f"block/put of {expected}"):
            answer = self._json("block/put", options, files=files)
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
        with self._errors(f"block/get of {cid}"), self._post("block/get", {"arg": cid}) as answer:
            data = self._body(answer, cap, f"for {cid}")
        return verified(digest, data, source=f"Kubo at {self.api_url}")

    def _body(self, answer: requests.Response, cap: int, what: str) -> bytes:
        """The answer's body, read as it comes (memory grows with the body, not with ``cap``);
        ``TooLarge`` past ``cap`` bytes, ``StoreTimeout`` past the store's timeout."""
        deadline = time.monotonic() + self.timeout
        chunks: list[bytes] = []
        received = 0
        for chunk in answer.iter_content(_CHUNK):
            received += len(chunk)
            if received > cap:
                raise TooLarge(f"{self.api_url} sent more than {cap} bytes {what}")
            if time.monotonic() > deadline:
                raise StoreTimeout(f"{self.api_url} took over {self.timeout}s {what}")
            chunks.append(chunk)
        return b"".join(chunks)

    def has(self, digest: bytes) -> bool:
        cid = cid_from_digest(check_digest(digest))
        try:
            with self._errors(f"block/stat of {cid}"):
                answer = self._json("block/stat", {"arg": cid, "offline": "true"})
        except NotFound:
            return False
        if _field(answer, "Key") != cid:
            raise StoreRejected(f"{self.api_url} answered block/stat of {cid} with {answer!r:.300}")
        return True

    def pin(self, digest: bytes) -> None:
        cid = cid_from_digest(check_digest(digest))
        with self._errors(f"pin/add of {cid}"):
            answer = self._json("pin/add", {"arg": cid})
        pins = _field(answer, "Pins")
        if not isinstance(pins, list) or cid not in [str(pin) for pin in pins]:
            raise StoreRejected(f"{self.api_url} answered pin/add of {cid} with {pins!r:.300}")

    def unpin(self, digest: bytes) -> None:
        cid = cid_from_digest(check_digest(digest))
        try:
            with self._errors(f"pin/rm of {cid}"):
                self._json("pin/rm", {"arg": cid})
        except StoreError as error:
            if "not pinned" not in str(error):  # Kubo's answer for a block nobody pinned
                raise

    def endpoint(self) -> StoreEndpoint:
        """The daemon's peer id and the multiaddrs it listens on (``id``), loopback included."""
        with self._errors("id"):
            answer = self._json("id", {})
        peer_id = _field(answer, "ID")
        addresses = _field(answer, "Addresses") or []
        if not isinstance(peer_id, str) or not peer_id or not isinstance(addresses, list):
            raise StoreRejected(f"unexpected answer from Kubo to id: {answer!r:.300}")
        return StoreEndpoint(peer_id, strip_peer_id(addresses, peer_id))

    def connect(self, endpoint: StoreEndpoint) -> None:
        """Connects the daemon to ``endpoint`` (libp2p dials its addresses, the first that
        answers with that peer id wins); any failure is StoreUnavailable, with a one-line
        reason."""
        if not endpoint.addrs:
            raise StoreUnavailable(f"no address to connect to peer {endpoint.peer_id}")
        args = [f"{addr}/p2p/{endpoint.peer_id}" for addr in endpoint.addrs]
        try:
            with self._errors(f"swarm/connect to {endpoint.peer_id}"):
                _field(self._json("swarm/connect", {"arg": args}), "Strings")
        except StoreError as error:
            raise StoreUnavailable(one_line(str(error))) from error

    def sign(self, message: bytes) -> bytes:
        """The daemon's own key (``self``) signs ``message`` (``key/sign``: libp2p's prefixed
        form, an endpoint announcement's proof). Not checked here: the announcer verifies the
        announcement it builds as its peers will (node.round.exchange)."""
        files = {"file": ("message", bytes(message), "application/octet-stream")}
        with self._errors("key/sign"):
            answer = self._json("key/sign", {"ipns-base": "b58mh"}, files=files)
        text = _field(answer, "Signature")
        refused = StoreRejected(f"key/sign answered a signature not in base64url: {text!r:.100}")
        if not isinstance(text, str) or not text.startswith("u"):  # multibase base64url
            raise refused
        try:
            return base64.urlsafe_b64decode(text[1:] + "=" * (-len(text[1:]) % 4))
        except (binascii.Error, ValueError):
            raise refused from None

    # --- HTTP

    @contextlib.contextmanager
    def _post(
        self, command: str, params: dict[str, Any], **extra: Any
    ) -> Iterator[requests.Response]:
        """The answer to ``command`` (streamed), after an error status became a StoreError."""
        params = {**params, "timeout": f"{max(1, round(self.timeout * 1000))}ms"}  # a Go duration
        answer = self._session.post(
            f"{self._base}/{command}",
            params=params,
            timeout=self.timeout,
            stream=True,
            allow_redirects=False,
            **extra,
        )
        with answer:
            if answer.status_code != 200:
                raise _status_error(answer)
            yield answer

    def _json(self, command: str, params: dict[str, Any], **extra: Any) -> Any:
        with self._post(command, params, **extra) as answer:
            body = self._body(answer, self.max_blob_size + _CHUNK, f"answering {command}")
        try:
            return json.loads(body)
        except ValueError:
            raise StoreRejected(f"{command} answered non-JSON: {body[:200]!r}") from None

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Maps requests/urllib3/socket errors onto the store's family, naming the call."""
        where = f"{doing} on {self.api_url}"
        try:
            yield
        except StoreError as error:
            if str(error).startswith(where):
                raise
            raise type(error)(f"{where}: {error}") from error
        except requests.exceptions.RequestException as error:
            if _is_timeout(error):
                raise StoreTimeout(f"{where}: no answer in {self.timeout}s") from error
            raise StoreUnavailable(f"{where}: {one_line(str(error))}") from error
        except (OSError, urllib3.exceptions.HTTPError) as error:
            if _is_timeout(error):
                raise StoreTimeout(f"{where}: no answer in {self.timeout}s") from error
            raise StoreUnavailable(f"{where}: {one_line(str(error))}") from error


def _session() -> requests.Session:
    """One connection pool for every thread of a store (node.sampling.fetch fetches
    concurrently): urllib3's pool is thread-safe, and nothing here uses what makes a shared
    Session unsafe (cookies, redirects, auth). No proxies from the environment: the RPC API is
    the node's own daemon."""
    session = requests.Session()
    session.trust_env = False
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=_POOL_SIZE)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _kubo_message(answer: requests.Response) -> tuple[str, bool]:
    """Kubo's error message (its JSON ``Message``) and True, else the start of the body and
    False (a proxy's or another server's answer)."""
    try:
        body = answer.raw.read(4096, decode_content=True)
    except (OSError, urllib3.exceptions.HTTPError):
        body = b""
    try:
        message = json.loads(body).get("Message")
        if isinstance(message, str):
            return message, True
    except (ValueError, AttributeError):
        pass
    return body.decode("utf-8", "replace"), False


def _status_error(answer: requests.Response) -> StoreError:
    """An HTTP error answer -> NotFound, StoreTimeout, TooLarge, StoreRejected or
    StoreUnavailable; only Kubo's own message is classified by its words."""
    status = answer.status_code
    message, from_kubo = _kubo_message(answer)
    detail = f"HTTP {status}: {one_line(message)}"
    lowered = message.lower() if from_kubo else ""
    if any(words in lowered for words in _NOT_FOUND):
        return NotFound(detail)
    if any(words in lowered for words in _TIMED_OUT):
        return StoreTimeout(detail)
    if any(words in lowered for words in _TOO_BIG):
        return TooLarge(detail)
    if 400 <= status < 500 and status not in (408, 429):
        return StoreRejected(detail)
    return StoreUnavailable(detail)


def _is_timeout(error: BaseException) -> bool:
    """Whether an error is (or wraps) a timeout: requests re-raises urllib3's read timeout
    during streaming as a plain ConnectionError."""
    if isinstance(error, (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError)):
        return True
    return any(_is_timeout(arg) for arg in error.args if isinstance(arg, BaseException))


def _field(answer: Any, name: str) -> Any:
    try:
        return answer[name]
    except (KeyError, TypeError, IndexError):
        raise StoreRejected(f"unexpected answer from Kubo (no {name!r}): {answer!r:.300}") from None


def one_line(text: str, limit: int = 300) -> str:
    """``text`` with its whitespace runs (newlines too) collapsed, cut at ``limit``."""
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def strip_peer_id(addresses: Sequence[Any], peer_id: str) -> tuple[str, ...]:
    """Multiaddrs without their ``/p2p/<peer_id>`` suffix, in order, without duplicates."""
    suffix = f"/p2p/{peer_id}"
    stripped = (a.removesuffix(suffix) for a in addresses if isinstance(a, str) and a)
    return tuple(dict.fromkeys(stripped))


def api_base(api_url: str) -> str:
    """``http://127.0.0.1:5001[/api/v0]`` -> ``http://127.0.0.1:5001/api/v0``; ValueError for
    anything that is not an http(s) URL with a host and a valid port."""
    parts = urllib.parse.urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a Kubo RPC API URL looks like http://127.0.0.1:5001, got {api_url!r}")
    try:
        _ = parts.port  # raises for a port that is not a number in 0..65535
    except ValueError:
        raise ValueError(f"bad port in {api_url!r}") from None
    path = parts.path.strip("/") or "api/v0"
    return f"{parts.scheme}://{parts.netloc}/{path}"

