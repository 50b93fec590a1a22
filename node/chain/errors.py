"""The chain layer's one exception family.

    ChainError                      anything that went wrong talking to the chain
    ├── RetryableChainError         transient: try again later (the sender retries these itself)
    │   ├── RpcUnavailable          RPC unreachable, timed out, HTTP 429 or 5xx
    │   ├── NonceConflict           another transaction took the nonce (resynced, then retried)
    │   └── ReceiptTimeout          sent, but no receipt in time (the transaction may still land)
    └── PermanentChainError         retrying the same thing fails the same way
        ├── RpcError                the node refused the request (bad parameters, no such method)
        │   └── StateUnavailable    it no longer keeps the state of the block asked for (pruned)
        ├── InsufficientFunds       the account cannot pay value + gas
        ├── ArtifactMissing         the forge build output is missing or unreadable
        ├── DeploymentFileError     the deployment record is missing, malformed or for another ABI
        ├── MissingAccount          a write was attempted by a read-only client
        └── ContractRevert          the contract reverted; one subclass per Solidity custom error
                                    (node.chain.reverts), named exactly like the error

Every message says what happened and, where a volunteer can do something about it, what to do.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ChainError(Exception):
    """Base of every error raised by ``node.chain``."""

    retryable: ClassVar[bool] = False


class RetryableChainError(ChainError):
    """A transient failure: the same request may succeed later."""

    retryable = True


class RpcUnavailable(RetryableChainError):
    """The RPC endpoint could not be reached or answered with 429/5xx or timed out."""


class NonceConflict(RetryableChainError):
    """The transaction's nonce was already used (another process or a stale local counter)."""


class ReceiptTimeout(RetryableChainError):
    """A transaction was sent but its receipt did not arrive in time."""

    def __init__(self, message: str, tx_hash: str) -> None:
        super().__init__(message)
        self.tx_hash = tx_hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.tx_hash))


class PermanentChainError(ChainError):
    """A failure that repeats if the same request is repeated."""


class RpcError(PermanentChainError):
    """The RPC node rejected the request."""


class StateUnavailable(RpcError):
    """The RPC node no longer keeps the state of the block a read named (a node that prunes old
    state; only an archive node keeps every block's)."""


class InsufficientFunds(PermanentChainError):
    """The sending account cannot pay for value plus gas."""


class BadRpcUrl(PermanentChainError):
    """An RPC URL that is not an http(s) URL (say, without its scheme)."""


class ArtifactMissing(PermanentChainError):
    """The contract build artifact (contracts/out) is missing or malformed."""


class DeploymentFileError(PermanentChainError):
    """The deployment record cannot be used."""


class MissingAccount(PermanentChainError):
    """A transaction was requested from a client that holds no account."""


class ContractRevert(PermanentChainError):
    """The contract reverted.

    Subclasses (node.chain.reverts) are named after the Solidity custom errors and carry the decoded
    arguments as snake_case attributes. A revert that matches no known error is raised as this class
    itself, with ``data`` the raw revert bytes and ``reason`` whatever could be read from them.

    Attributes: ``data`` (raw revert bytes), ``tx_hash`` (set when the revert was mined),
    ``values`` (decoded arguments by name).
    """

    #: The Solidity error name; empty for unknown reverts.
    error_name: ClassVar[str] = ""
    #: Python attribute names of the Solidity error's arguments, in ABI order.
    fields: ClassVar[tuple[str, ...]] = ()
    registry: ClassVar[dict[str, type[ContractRevert]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.error_name:
            ContractRevert.registry[cls.error_name] = cls

    def __init__(
        self,
        *values: Any,
        data: bytes = b"",
        reason: str = "",
        now: int | None = None,
        tx_hash: str | None = None,
    ) -> None:
        if len(values) != len(self.fields):
            raise TypeError(
                f"{type(self).__name__} takes {len(self.fields)} values, got {len(values)}"
            )
        self.values = dict(zip(self.fields, values, strict=True))
        for name, value in self.values.items():
            setattr(self, name, value)
        self.data = data
        self.reason = reason
        self.now = now
        self.tx_hash = tx_hash
        super().__init__(self._render())

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"data": self.data, "reason": self.reason, "now": self.now, "tx_hash": self.tx_hash}
        return (_rebuild_revert, (type(self), tuple(self.values.values()), state))

    def describe(self) -> str:
        """The volunteer-facing message; subclasses override."""
        if self.reason:
            return f"the contract reverted: {self.reason}"
        raw = "0x" + self.data.hex() if self.data else "no data"
        return f"the contract reverted without a known reason ({raw})"

    def with_context(self, *, now: int | None = None, tx_hash: str | None = None) -> ContractRevert:
        """Adds the chain time (for "time left") and/or the mined tx hash; returns self."""
        if now is not None:
            self.now = now
        if tx_hash is not None:
            self.tx_hash = tx_hash
        self.args = (self._render(),)
        return self

    def _render(self) -> str:
        message = self.describe()
        return f"{message} (transaction {self.tx_hash})" if self.tx_hash else message


def _rebuild_revert(
    cls: type[ContractRevert], values: tuple[Any, ...], state: dict[str, Any]
) -> ContractRevert:
    """Unpickles a ContractRevert (exceptions with keyword arguments need this)."""
    return cls(*values, **state)
