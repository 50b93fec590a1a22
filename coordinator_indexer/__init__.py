"""The coordinator indexer: the SwarmCoordinator's events in a database, a JSON API and the public
leaderboard page. It imports the node's chain bindings (``node.chain``) and nothing else of ``node``
(no torch, no model code), so it installs and runs light.

Modules, one concern each:

- ``schema``      the tables (SQLAlchemy Core; SQLite and Postgres); ``migrations`` versions them
- ``records``     decoded events -> event-table rows, and the derived keys they touch
- ``derive``      derived rows (batch verdicts, peers, rounds) recomputed from the event tables;
                  the definition of *verified reward* lives here
- ``advance``     a range's rows applied going forward: derived rows moved by what changed
- ``bulk``        many rows through one statement, without SQLAlchemy's per-row work
- ``store``       the database: cursor, one transaction per applied range, rollbacks
- ``chainview``   head and block headers; ``fetch``: one block range read into rows
- ``readahead``   the next ranges read by reader processes while the database takes the current
- ``ingest``      the reorg-safe ingestion loop
- ``queries``     read-side SQL; ``models``: the API's response models; ``api``: the FastAPI app
- ``progress``    progress lines; ``service``: ingestion + HTTP server threads; ``cli``: the command

Use from another program::

    from coordinator_indexer import IndexerService, ServiceSettings

    with IndexerService(ServiceSettings(rpc_url=url, deployment=path, db_url="sqlite:///x.db",
                                        port=0)) as service:
        print(service.url)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "IndexerService": "service",
    "ServiceSettings": "service",
    "Indexer": "ingest",
    "IngestSettings": "ingest",
    "Store": "store",
    "create_app": "api",
    "IndexerError": "errors",
    "ReorgTooDeep": "errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'coordinator_indexer' has no attribute {name!r}")
    return getattr(importlib.import_module(f"coordinator_indexer.{_EXPORTS[name]}"), name)
