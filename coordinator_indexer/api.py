"""The HTTP API and the leaderboard page, one FastAPI app over the indexer's database
(docs/API.md describes every endpoint and field).

    GET /                      the leaderboard page (static HTML, JS, CSS; no build step)
    GET /api/                  the index of these endpoints: name, path, one-line description
    GET /api/leaderboard       ranked peers, paged and sortable
    GET /api/peers/{address}   one peer: summary, batches round by round, stake history, duty
    GET /api/rounds            round totals (the reward-over-rounds series), paged
    GET /api/rounds/{round}    one round: totals, batches with their committee votes, duties
    GET /api/stats             swarm totals (active peers, rounds, batches, verified share)
    GET /health                indexer lag in blocks; 503 when ingestion stopped on an error
    GET /openapi.json          the schema of all of the above

The interactive docs pages are switched off: they load their scripts from a CDN, and the indexer
must work offline. Bad input gets a 422 with a one-line ``detail``; every accepted range and pattern
is in the OpenAPI document. Fields with protocol v1 names are deprecated aliases of their new
names, answered beside them until the next release (``models.DeprecatedNames``). Integers stop
at 2^63 - 1 because both databases hold int64: rounds are uint64 on-chain, but
``(timestamp - genesis) / roundDuration`` stays far below 2^63.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from eth_utils import to_checksum_address
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import BeforeValidator

from coordinator_indexer import queries
from coordinator_indexer.models import (
    ApiIndex,
    Health,
    Leaderboard,
    LeaderboardEntry,
    PeerDetail,
    Problem,
    RoundDetail,
    RoundsPage,
    Stats,
)
from coordinator_indexer.store import IndexerState, Store
from node.chain.deployment import Deployment

STATIC_DIR = Path(str(resources.files("coordinator_indexer") / "static"))
MAX_PAGE = 500
#: Largest integer a path or query parameter may be: the databases' int64 (SQLite's driver
#: overflows above it, Postgres' bigint ends there).
MAX_INT64 = 2**63 - 1
ADDRESS_PATTERN = r"^0x[0-9a-fA-F]{40}$"
#: "ok" means caught up once (when ingestion runs in this process) and at most this many blocks
#: behind the head seen at the last poll.
LAG_OK_BLOCKS = 10
#: The API's version (OpenAPI info.version): 3 names fields in the protocol's words and answers
#: the v2 names beside them, deprecated (docs/API.md, "Deprecated names").
API_VERSION = "3"
#: Where the API's fields are described.
API_DOCS = "docs/API.md in the indexer's repository; the schema at /openapi.json"
#: Leaderboard pages (sort, order, limit, offset) the server keeps encoded, per indexed state
#: (the latest ones: any limit and offset may be asked for).
PAGES_KEPT = 1024
#: Leaderboard entries (one per peer, by rank) the server keeps encoded, per indexed state, so
#: that a page not read before is mostly a join of kept entries (about 0.5 kB each).
ENTRIES_KEPT = 50_000


def _decimal(value: object) -> object:
    """One form per number: decimal digits, no sign, point, exponent, space, underscore or
    leading zero (Python's ``int`` would read ``1_0`` as 10, pydantic ``1.0`` as 1)."""
    if isinstance(value, str) and not _DECIMAL.fullmatch(value):
        raise ValueError("expected decimal digits without a sign, point or leading zero")
    return value


_DECIMAL = re.compile(r"0|[1-9][0-9]*")
#: After a parameter's Query/Path (so that its bounds stay in the OpenAPI schema).
Decimal = BeforeValidator(_decimal)


def _encoded_entries(peers: queries.RankedPeers, ranks: list[int]) -> dict[int, bytes]:
    """The JSON of each rank's leaderboard entry, with its deprecated names."""
    found = peers.entries(ranks)
    return {
        rank: LeaderboardEntry.model_validate(entry).model_dump_json(by_alias=True).encode()
        for rank, entry in found.items()
    }


def leaderboard_body(header: dict, encoded_entries: list[bytes]) -> bytes:
    """A ``Leaderboard`` as JSON from its fields but entries (in the model's order) and its
    entries already encoded: the bytes ``Leaderboard.model_dump_json`` would give."""
    fields = Leaderboard.model_validate({**header, "entries": []}).model_dump_json(by_alias=True)
    head = fields[: -len("[]}")].encode()
    return head + b"[" + b",".join(encoded_entries) + b"]}"


@dataclass
class IngestStatus:
    """What the ingestion thread tells the API (``/health``)."""

    caught_up: bool = False
    error: str | None = None
    running: bool = True


def create_app(
    store: Store,
    deployment: Deployment,
    *,
    status: Callable[[], IngestStatus] | None = None,
) -> FastAPI:
    """The app; ``status`` reports the in-process ingestion (None: judge by the database)."""
    kept = queries.PerState()  # the ranked peers, their sort orders and the stats, per state
    pages = queries.PerState(most=PAGES_KEPT)  # each leaderboard page, as its JSON body
    entries = queries.PerState(most=ENTRIES_KEPT)  # each peer's leaderboard entry, as JSON
    app = FastAPI(
        title="Swarm coordinator indexer",
        version=API_VERSION,
        description="Peers, rounds and verified rewards of one SwarmCoordinator, from its events.",
        docs_url=None,
        redoc_url=None,
        responses={
            404: {"model": Problem, "description": "No such peer or round (as far as indexed)."},
            422: {"model": Problem, "description": "A parameter outside its range or pattern."},
            503: {"model": Problem, "description": "Ingestion stopped on an error (the reason)."},
        },
    )
    app.add_exception_handler(RequestValidationError, _validation_problem)  # type: ignore[arg-type]

    def closed(state: IndexerState | None) -> int | None:
        """Rounds below this one are past their reveal phase at the indexed block."""
        if state is None:
            return None
        return state.closed_before(deployment.genesis, deployment.round_duration)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get(
        "/api/",
        response_model=ApiIndex,
        tags=["swarm"],
        name="index",
        summary="This list of the API's endpoints: name, path, one-line description.",
    )
    def index() -> dict:
        return api_index(app)

    @app.get(
        "/api/leaderboard",
        response_model=Leaderboard,
        tags=["leaderboard"],
        summary="Peers ranked by verified reward (a sum of batch rewards), paged and sortable.",
    )
    def leaderboard(
        limit: Annotated[
            int, Query(ge=1, le=MAX_PAGE, description="Peers per page."), Decimal
        ] = 50,
        offset: Annotated[
            int, Query(ge=0, le=MAX_INT64, description="Peers to skip (0 to 2^63 - 1)."), Decimal
        ] = 0,
        sort: Annotated[
            Literal[
                "rank",
                "verified",
                "claimed",
                "rounds",
                "stake",
                "slashes",
                "name",
                "duty_done",
                "duty_missed",
            ],
            Query(description="Column to sort by."),
        ] = "rank",
        order: Annotated[Literal["asc", "desc"] | None, Query()] = None,
    ) -> Response:
        """Peers ranked by verified reward, with their committee duty (seats held, done, missed).
        ``order`` defaults to best first (desc; asc for rank and name)."""
        chosen = order or ("asc" if sort in ("rank", "name") else "desc")
        state = store.state()
        key = queries.state_key(state)

        def read_peers() -> queries.RankedPeers:
            with store.engine.connect() as conn:
                return queries.ranked_peers(conn)

        def read() -> bytes:
            peers = kept.get(key, "ranked peers", read_peers)
            ordered = kept.get(key, ("order", sort, chosen), partial(peers.order, sort, chosen))
            ranks = peers.page(ordered, limit, offset)
            encoded = entries.get_many(key, ranks, partial(_encoded_entries, peers))
            header = {
                "total": peers.total,
                "limit": limit,
                "offset": offset,
                "sort": sort,
                "order": chosen,
                "indexed_block": state.cursor_block if state else None,
            }
            return leaderboard_body(header, encoded)

        body = pages.get(key, (sort, chosen, limit, offset), read)
        return Response(body, media_type="application/json")

    @app.get(
        "/api/peers/{address}",
        response_model=PeerDetail,
        tags=["peers"],
        summary="One peer: summary, batches with their verdicts, stake history, committee duty.",
    )
    def peer(
        address: Annotated[
            str,
            PathParam(
                pattern=ADDRESS_PATTERN,
                description="The peer's address: 0x and 40 hex digits, any case (the EIP-55 "
                "checksum is not required).",
            ),
        ],
    ) -> dict:
        """One peer: summary, every batch with its verdict (committee weights, outcome, pending),
        its stake history and its committee duty per round."""
        checksummed = to_checksum_address(address.lower())
        with store.engine.connect() as conn:
            found = queries.peer(conn, checksummed, closed_before=closed(store.state()))
        if found is None:
            raise HTTPException(404, f"no peer {checksummed} is registered (as far as indexed)")
        return found

    @app.get(
        "/api/rounds",
        response_model=RoundsPage,
        tags=["rounds"],
        summary="Totals per round (the reward-over-rounds series), with which are pending, paged.",
    )
    def rounds(
        limit: Annotated[
            int, Query(ge=1, le=MAX_PAGE, description="Rounds per page."), Decimal
        ] = 100,
        offset: Annotated[
            int, Query(ge=0, le=MAX_INT64, description="Rounds to skip (0 to 2^63 - 1)."), Decimal
        ] = 0,
        order: Literal["asc", "desc"] = "asc",
    ) -> dict:
        """Totals per round (claimed and verified reward, batches, committee verdicts, slashes),
        and whether each is pending (its verified reward is no verdict yet)."""
        with store.engine.connect() as conn:
            page = queries.rounds_page(
                conn, limit=limit, offset=offset, order=order, closed_before=closed(store.state())
            )
        return {**page, "limit": limit, "offset": offset, "order": order}

    @app.get(
        "/api/rounds/{round}",
        response_model=RoundDetail,
        tags=["rounds"],
        name="round",
        summary="One round: totals, batches with their committee's votes, duty of each seat.",
    )
    def round_(
        round: Annotated[
            int, PathParam(ge=0, le=MAX_INT64, description="The round (0 to 2^63 - 1)."), Decimal
        ],
    ) -> dict:
        """One round: totals, every batch published for it with its committee's votes (weights,
        flags, outcome), and each seated peer's committee duty."""
        with store.engine.connect() as conn:
            found = queries.round_detail(conn, round, closed_before=closed(store.state()))
        if found is None:
            raise HTTPException(404, f"round {round} has no batches (as far as indexed)")
        return found

    @app.get(
        "/api/stats",
        response_model=Stats,
        tags=["swarm"],
        summary="Swarm totals: peers, rounds, batches, verified and pending ones, rewards.",
    )
    def stats() -> dict:
        """Swarm totals."""
        state = store.state()
        with store.engine.connect() as conn:
            totals = kept.get(
                queries.state_key(state),
                "stats",
                lambda: queries.stats(conn, state, deployment.round_duration, deployment.genesis),
            )
        return {
            **totals,
            "indexed_block": state.cursor_block if state else None,
            "chain_id": deployment.chain_id,
            "coordinator": deployment.coordinator,
        }

    @app.get(
        "/health",
        response_model=Health,
        tags=["swarm"],
        summary="Indexer lag in blocks; 503 once ingestion stopped on an error.",
        responses={503: {"model": Health, "description": "Ingestion stopped on an error."}},
    )
    def health() -> JSONResponse:
        """Indexer lag in blocks. 200 while ingesting; 503 once ingestion stopped on an error."""
        body = _health(store, status() if status else None)
        return JSONResponse(body.model_dump(), status_code=503 if body.status == "error" else 200)

    return app


def api_index(app: FastAPI) -> dict:
    """The index ``GET /api/`` answers: every endpoint of the OpenAPI document, in the order they
    were declared, and the document itself."""
    routes = [
        {
            "name": route.name,
            "path": route.path,
            "description": route.summary or route.name,
            "deprecated": bool(route.deprecated),
        }
        for route in app.routes
        if isinstance(route, APIRoute) and route.include_in_schema
    ]
    routes.append(
        {
            "name": "openapi",
            "path": app.openapi_url or "/openapi.json",
            "description": "The OpenAPI schema of all of the above.",
            "deprecated": False,
        }
    )
    return {"title": app.title, "version": app.version, "docs": API_DOCS, "endpoints": routes}


def _health(store: Store, live: IngestStatus | None) -> Health:
    state = store.state()
    if live is not None and live.error:
        verdict = "error"
    elif state is None:
        verdict = "starting"
    elif live is not None and not live.caught_up:
        verdict = "catching_up"
    else:  # caught up once, or API-only: judge by the lag seen at the last poll
        verdict = "ok" if state.lag <= LAG_OK_BLOCKS else "catching_up"
    return Health(
        status=verdict,
        indexed_block=state.cursor_block if state else None,
        chain_head=state.chain_head if state else None,
        lag_blocks=state.lag if state else None,
        final_block=state.final_block if state else None,
        confirmations=state.confirmations if state else None,
        last_update=state.updated_at if state else None,
        error=live.error if live else None,
    )


async def _validation_problem(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's validation errors as one readable line (still 422)."""
    parts = []
    for error in exc.errors():
        where = " ".join(str(x) for x in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')} (got {error.get('input')!r})")
    return JSONResponse({"detail": "; ".join(parts) or "invalid request"}, status_code=422)
