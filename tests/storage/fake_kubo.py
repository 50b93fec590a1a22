"""A tiny Kubo RPC API on 127.0.0.1 for tests: real HTTP, the calls KuboStore makes.

Implements, like Kubo does: POST only; ``block/put`` with a multipart body (chunked or not),
``cid-codec``/``mhtype`` options, the 1 MiB block limit and Kubo's answer ``{"Key", "Size"}``;
``block/get`` and ``block/stat`` (raw bytes / ``{"Key", "Size"}``, or Kubo's offline
"not found" error); ``pin/add`` (``{"Pins": [cid]}``); ``id`` (``{"ID", "Addresses"}``, the
addresses with their ``/p2p/<id>`` suffix); ``swarm/connect`` (``{"Strings"}``, or Kubo's
multi-line dial error for a peer id not in ``FakeKubo.reachable``). Errors are Kubo's JSON
``{"Message", "Code", "Type": "error"}`` with HTTP 500 (or 400 for bad arguments).
CIDs are computed here from the spec with ``base64``, independently of node.storage.cid.

Misbehaviours for tests (``FakeKubo.mode``): ``"liar"`` serves other bytes on block/get,
``"wrong_key"`` reports another CID on block/put, ``"hang"`` never answers (until the fixture
ends), ``"stall"`` sends half a block on block/get and then nothing, ``"huge"`` streams more
than any cap on block/get, ``"teapot"`` answers 418 to everything, ``"garbage"`` answers 200 with
HTML to everything, ``"odd_json"`` answers 200 with JSON of the wrong shape.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KUBO_BLOCK_LIMIT = 1024 * 1024


def raw_cid(data: bytes) -> str:
    raw = bytes([0x01, 0x55, 0x12, 0x20]) + hashlib.sha256(data).digest()
    return "b" + base64.b32encode(raw).decode().lower().rstrip("=")


class FakeKubo:
    """State shared by the handler threads."""

    def __init__(self) -> None:
        self.blocks: dict[str, bytes] = {}
        self.pins: set[str] = set()
        self.mode = "honest"
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.release = threading.Event()  # ends "hang"
        self.url = ""
        self.peer_id = "12D3KooWFakeFakeFakeFakeFakeFakeFakeFakeFakeFakeFake"
        self.addresses = ["/ip4/127.0.0.1/tcp/4001", "/ip4/10.1.2.3/tcp/4001"]
        self.reachable: set[str] = set()
        self.connected: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._error(405, "method GET not allowed")

    def do_POST(self) -> None:
        kubo = self.server.kubo
        parts = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parts.query)
        body = self._read_body()
        kubo.requests.append((parts.path, query))
        if kubo.mode == "hang":
            kubo.release.wait(20)
            return
        if kubo.mode == "teapot":
            self._send(418, b"I'm a teapot", "text/plain")
            return
        if kubo.mode == "garbage":
            self._send(200, b"<html><body>welcome to the router</body></html>", "text/html")
            return
        if kubo.mode == "odd_json":
            self._json(["an", "array", {"ID": 7}])
            return
        command = parts.path.removeprefix("/api/v0/")
        handler = {
            "block/put": self._block_put,
            "block/get": self._block_get,
            "block/stat": self._block_stat,
            "pin/add": self._pin_add,
            "id": self._id,
            "swarm/connect": self._swarm_connect,
        }.get(command)
        if handler is None:
            self._send(404, b"404 page not found", "text/plain")
            return
        handler(query, body)

    def _block_put(self, query: dict[str, list[str]], body: bytes) -> None:
        if query.get("cid-codec") != ["raw"] or query.get("mhtype") != ["sha2-256"]:
            self._error(400, "this fake only stores raw sha2-256 blocks", code=1)
            return
        data = _multipart_file(self.headers.get("Content-Type", ""), body)
        if data is None:
            self._error(400, "file argument 'data' is required", code=1)
            return
        if len(data) > KUBO_BLOCK_LIMIT:
            self._error(500, "produced block is over 1MiB: big blocks can't be exchanged")
            return
        cid = raw_cid(data)
        self.server.kubo.blocks[cid] = data
        if query.get("pin") == ["true"]:
            self.server.kubo.pins.add(cid)
        key = raw_cid(data + b"?") if self.server.kubo.mode == "wrong_key" else cid
        self._json({"Key": key, "Size": len(data)})

    def _block_get(self, query: dict[str, list[str]], body: bytes) -> None:
        data = self._lookup(query)
        if data is None:
            return
        if self.server.kubo.mode == "liar":
            data = data + b" and then some"
        if self.server.kubo.mode == "huge":
            self._stream_forever()
            return
        if self.server.kubo.mode == "stall":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.server.kubo.release.wait(20)
            self.close_connection = True
            return
        self._send(200, data, "text/plain")

    def _block_stat(self, query: dict[str, list[str]], body: bytes) -> None:
        data = self._lookup(query)
        if data is not None:
            self._json({"Key": query["arg"][0], "Size": len(data)})

    def _pin_add(self, query: dict[str, list[str]], body: bytes) -> None:
        if self._lookup(query) is not None:
            self.server.kubo.pins.add(query["arg"][0])
            self._json({"Pins": [query["arg"][0]]})

    def _id(self, query: dict[str, list[str]], body: bytes) -> None:
        kubo = self.server.kubo
        addresses = [f"{a}/p2p/{kubo.peer_id}" for a in kubo.addresses]
        self._json({"ID": kubo.peer_id, "Addresses": addresses, "AgentVersion": "kubo/0.43.1"})

    def _swarm_connect(self, query: dict[str, list[str]], body: bytes) -> None:
        args = query.get("arg", [])
        peers = {a.rpartition("/p2p/")[2] for a in args}
        if not args or len(peers) != 1:
            self._error(400, "argument 'address' is required", code=1)
            return
        (peer,) = peers
        if peer not in self.server.kubo.reachable:
            lines = "\n".join(f"  * [{a}] dial tcp: connection refused" for a in args)
            self._error(500, f"connect {peer} failure: failed to dial {peer}:\n{lines}")
            return
        self.server.kubo.connected.extend(args)
        self._json({"Strings": [f"connect {peer} success"]})

    def _lookup(self, query: dict[str, list[str]]) -> bytes | None:
        args = query.get("arg", [])
        if len(args) != 1:
            self._error(400, "argument 'cid' is required", code=1)
            return None
        data = self.server.kubo.blocks.get(args[0])
        if data is None:
            self._error(
                500, f"block was not found locally (offline): ipld: could not find {args[0]}"
            )
        return data

    def _stream_forever(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b"x" * 65536
        try:
            for _ in range(1000):  # 64 MiB at most, then give up
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass  # the client hung up, as it should
        self.close_connection = True

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _error(self, status: int, message: str, code: int = 0) -> None:
        self._json({"Message": message, "Code": code, "Type": "error"}, status)

    def _json(self, value: object, status: int = 200) -> None:
        self._send(status, json.dumps(value).encode() + b"\n", "application/json")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _multipart_file(content_type: str, body: bytes) -> bytes | None:
    """The first part's content of a multipart/form-data body."""
    _, _, params = content_type.partition(";")
    boundary = None
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name == "boundary":
            boundary = value.strip('"')
    if not boundary:
        return None
    delimiter = b"--" + boundary.encode()
    sections = body.split(delimiter)
    if len(sections) < 3:
        return None
    part = sections[1]
    header_end = part.find(b"\r\n\r\n")
    if header_end < 0:
        return None
    content = part[header_end + 4 :]
    return content[:-2] if content.endswith(b"\r\n") else content


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    kubo: FakeKubo


@contextmanager
def running_fake_kubo() -> Iterator[FakeKubo]:
    """A FakeKubo serving on 127.0.0.1 (a free port) until the block ends."""
    kubo = FakeKubo()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.kubo = kubo
    kubo.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield kubo
    finally:
        kubo.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
