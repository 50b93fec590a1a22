"""``python -m coordinator_indexer`` is ``swarm-indexer``."""

from coordinator_indexer.cli import entry

entry()
