"""The indexer as a service: ingestion in one thread, the HTTP server in another.

For another program (the local swarm launcher, tests):

    service = IndexerService(ServiceSettings(rpc_url=..., deployment=Path(...), db_url=...))
    service.start()            # checks chain and database, binds the port, starts both threads
    print(service.url)         # http://127.0.0.1:<port>/ (port 0 picks a free one)
    ...
    service.stop()             # or: with IndexerService(...) as service: ...

or as a subprocess: ``swarm-indexer run ...`` (``coordinator_indexer.cli``), which prints
``serving <url>`` once the port accepts connections and stops on SIGINT or SIGTERM.

When ingestion stops on an error (a reorg deeper than the kept window, say), the server stays up:
``/health`` answers 503 with the error and every ``/api/...`` route answers 503 with it too, so a
public leaderboard explains itself instead of refusing connections, and never serves rows it can
no longer vouch for. ``failed`` is set then; ``stopped`` only when the service stops.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.routing import Match

from coordinator_indexer.api import IngestStatus, create_app
from coordinator_indexer.errors import ConfigError, IndexerError
from coordinator_indexer.ingest import Indexer, IngestSettings
from coordinator_indexer.progress import ProgressPrinter
from coordinator_indexer.store import Store
from node.chain.deployment import Deployment
from node.chain.errors import ChainError
from node.chain.rpc import connect

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceSettings:
    """Everything ``swarm-indexer run`` takes."""

    rpc_url: str
    deployment: Path
    db_url: str
    host: str = "127.0.0.1"
    port: int = 8600
    ingest: IngestSettings = field(default_factory=IngestSettings)
    rpc_timeout: float = 30.0


class IndexerService:
    """Ingestion thread + HTTP server thread over one database."""

    def __init__(
        self,
        settings: ServiceSettings,
        *,
        write: Callable[[str], None] | None = None,
        verbose: bool = False,
    ) -> None:
        self.settings = settings
        self.write = write or (lambda line: None)
        self.verbose = verbose
        self.status = IngestStatus(running=False)
        self.stopped = threading.Event()  # set when the service stops, for whatever reason
        self.failed = threading.Event()  # set when ingestion stops on an error (still serving)
        self._stop_ingest = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: uvicorn.Server | None = None
        self.store: Store | None = None
        self.url = ""

    # ------------------------------------------------------------------------------- starting

    def start(self, *, ready_timeout: float = 30.0) -> str:
        """Checks everything, starts both threads, returns the URL once the port serves.

        Raises IndexerError/ChainError (one-line messages) when the deployment file, the RPC, the
        database or the port is not usable; nothing is left running then.
        """
        try:
            deployment = Deployment.load(self.settings.deployment)
        except ChainError as exc:
            raise ConfigError(str(exc)) from None
        w3 = connect(self.settings.rpc_url, timeout=self.settings.rpc_timeout)
        self.store = Store.open(self.settings.db_url)
        try:
            indexer = Indexer(w3, deployment, self.store, self.settings.ingest)
            state = indexer.prepare()
            sock = _bind(self.settings.host, self.settings.port)
        except BaseException:
            self.store.close()
            raise
        host, port = sock.getsockname()[:2]
        self.url = f"http://{_url_host(self.settings.host, host)}:{port}/"
        app = create_app(self.store, deployment, status=lambda: self.status)
        app.middleware("http")(self._refuse_when_failed)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        progress = ProgressPrinter(self.write, start_block=state.cursor_block, verbose=self.verbose)
        self.status.running = True
        self._spawn("indexer-http", lambda: self._serve(sock))
        self._spawn("indexer-ingest", lambda: self._ingest(indexer, progress))
        self._wait_ready(ready_timeout)
        return self.url

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _wait_ready(self, timeout: float) -> None:
        server = self._server
        assert server is not None
        waited = threading.Event()
        for _ in range(int(timeout / 0.02)):
            if server.started or self.stopped.is_set():
                break
            waited.wait(0.02)
        if not server.started:
            self.stop()
            raise IndexerError(f"the HTTP server did not start within {timeout:.0f} s")

    # -------------------------------------------------------------------------------- threads

    def _serve(self, sock: socket.socket) -> None:
        assert self._server is not None
        try:
            self._server.run(sockets=[sock])
        except BaseException as exc:  # noqa: BLE001 - reported, then the service stops
            self.status.error = f"the HTTP server failed: {exc!r}"
            log.exception("HTTP server failed")
        finally:
            sock.close()
            self.stopped.set()

    def _ingest(self, indexer: Indexer, progress: ProgressPrinter) -> None:
        def on_step(result: object) -> None:
            progress.step(result)  # type: ignore[arg-type]
            if progress.caught_up:
                self.status.caught_up = True

        try:
            indexer.run(self._stop_ingest, on_step=on_step, on_unavailable=progress.rpc_unavailable)
        except (IndexerError, ChainError) as exc:
            self._fail(str(exc))
        except Exception as exc:
            log.exception("ingestion failed")
            self._fail(f"unexpected error in ingestion: {exc!r}")
        finally:
            indexer.close()
            self.status.running = False
        if self.failed.is_set():
            self._follow_head(indexer)

    def _follow_head(self, indexer: Indexer) -> None:
        """After ingestion stopped on an error: keeps ``/health``'s chain head and lag live (the
        rows stay as they were); an RPC or database error leaves the last head seen."""
        while not self._stop_ingest.wait(indexer.settings.poll_interval):
            try:
                indexer.note_head()
            except Exception as exc:  # noqa: BLE001 - the head is all that is at stake
                log.debug("following the head after the failure: %r", exc)

    def _fail(self, error: str) -> None:
        """Ingestion is over for good; the server goes on answering 503 with ``error``."""
        self.status.error = error
        self.write(f"error: {error}")
        self.write("still serving: /health and every /api/ route answer 503 with this reason")
        self.failed.set()

    async def _refuse_when_failed(self, request: Request, call_next: Callable) -> object:
        """After a failure, the 503 for every ``/api/`` request a route would answer; unknown
        paths and methods still get their 404 and 405."""
        if self.status.error and request.url.path.startswith("/api/") and _routed(request):
            return JSONResponse(
                {"detail": f"indexing stopped: {self.status.error}"}, status_code=503
            )
        return await call_next(request)

    # ------------------------------------------------------------------------------- stopping

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until the service stops: the HTTP server failed, or ``stop`` was called (a failed
        ingestion does not stop it; see ``failed``)."""
        return self.stopped.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stops ingestion (after its current step) and the server; closes the database."""
        self._stop_ingest.set()
        if self._server is not None:
            self._server.should_exit = True
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        if self.store is not None:
            self.store.close()
        self.stopped.set()

    def __enter__(self) -> IndexerService:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _routed(request: Request) -> bool:
    """Whether one of the app's routes answers ``request``'s path and method."""
    return any(route.matches(request.scope)[0] is Match.FULL for route in request.app.router.routes)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a busy port is a clear error and port 0 works."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP,
    # and without it every keep-alive response waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): choose another --port or --host"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _url_host(requested: str, bound: str) -> str:
    if requested in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return f"[{bound}]" if ":" in bound else bound
