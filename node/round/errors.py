"""Why a node cannot run: each message says what to do about it."""

from __future__ import annotations

from node.chain.errors import PermanentChainError


class NodeError(Exception):
    """Base of the round orchestration's own errors."""


class StateError(NodeError):
    """The state file is unreadable or belongs to another chain or peer."""


class BatchShapeError(NodeError):
    """The round asks for more tasks than this node's preset derives: no batch of it is valid."""


class NotActive(NodeError):
    """This peer is not registered, or exiting: it cannot publish."""


class ChainReset(PermanentChainError):
    """The chain no longer holds the deployment this node works with."""
