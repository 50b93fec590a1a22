"""The indexer's exceptions: each message says what happened and what to do about it.

The CLI prints these as one line (no traceback); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class IndexerError(Exception):
    """Base class: a condition an operator can act on."""


class ConfigError(IndexerError):
    """Bad settings (database URL, deployment file, ports...)."""


class DeploymentMismatch(IndexerError):
    """The database, the deployment file and the chain do not describe the same coordinator."""


class ReorgTooDeep(IndexerError):
    """A reorg reached below the kept block window: the indexed data can no longer be trusted.

    Ingestion stops instead of serving rows from a chain that no longer exists. Re-index from
    scratch (a new database) or raise ``--confirmations`` for a chain with deeper reorgs.
    """

    def __init__(self, message: str, *, oldest_kept: int, cursor: int) -> None:
        super().__init__(message)
        self.oldest_kept = oldest_kept
        self.cursor = cursor


class ConcurrentWriter(IndexerError):
    """Another indexer moved the cursor of this database: two writers must not share one."""
