"""Talking to an RPC node: building the Web3 object, sorting its exceptions into the chain error
family, and retrying transient failures with exponential backoff.

web3.py's own HTTP retries are switched off so there is one retry policy, ours, applied only to
errors that are transient (:class:`~node.chain.errors.RetryableChainError`).
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import requests
from web3 import HTTPProvider, Web3
from web3.exceptions import (
    BlockNotFound,
    ContractLogicError,
    ProviderConnectionError,
    RequestTimedOut,
    TooManyRequests,
    TransactionNotFound,
    Web3RPCError,
)
from web3.types import RPCEndpoint

from node.chain.errors import (
    BadRpcUrl,
    ChainError,
    ContractRevert,
    InsufficientFunds,
    NonceConflict,
    RpcError,
    RpcUnavailable,
    StateUnavailable,
)
from node.chain.revert_decoding import decode_revert
from node.urls import rpc_url_problem

log = logging.getLogger(__name__)
T = TypeVar("T")

_NONCE_MESSAGES = (
    "nonce too low",
    "already known",
    "replacement transaction underpriced",
    "nonce has already been used",
    "known transaction",
)
_RATE_LIMIT_MESSAGES = ("rate limit", "too many requests", "exceeded the rate", "capacity exceeded")
#: How clients say they pruned the state asked for: geth and Nethermind, geth's path scheme,
#: Erigon, OpenEthereum.
_PRUNED_STATE_MESSAGES = (
    "missing trie node",
    "historical state",
    "due to pruning",
    "state pruning",
)
#: Anvil's answer for a block whose state it dropped: a block *below* its height.
_ANVIL_OUT_OF_RANGE = re.compile(r"block height is (\d+) but requested was (\d+)")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently transient RPC failures are retried.

    Failed attempt n (from 1) waits ``min(max_delay, initial_delay * multiplier**(n-1))`` seconds,
    jittered by +-``jitter`` of itself, before attempt n+1; after ``attempts`` attempts the error
    is raised.
    """

    attempts: int = 5
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 8.0
    jitter: float = 0.1

    def retry_line(self, what: str, cause: str, attempt: int, delay: float) -> str:
        """The one line logged before a retry: the same format for chain and store calls."""
        return f"{what} failed ({cause}); retry {attempt} of {self.attempts - 1} in {delay:.1f} s"

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return base * (1 + random.uniform(-self.jitter, self.jitter))


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(attempts=1)


def connect(rpc_url: str, *, timeout: float = 10.0) -> Web3:
    """A Web3 for an HTTP(S) JSON-RPC URL, with a request timeout and web3's own retries off.

    ``eth_chainId`` answers are cached (web3 asks for it before every call it validates); nothing
    else is, so a reorg or an Anvil revert is never hidden by a cache. BadRpcUrl for anything
    that is not an http(s) URL with a host.
    """
    check_rpc_url(rpc_url)
    provider = HTTPProvider(
        rpc_url,
        request_kwargs={"timeout": timeout},
        exception_retry_configuration=None,
        cache_allowed_requests=True,
        cacheable_requests={RPCEndpoint("eth_chainId")},
    )
    return Web3(provider)


def check_rpc_url(rpc_url: str) -> str:
    """``rpc_url`` if it is an http(s) URL with a host; BadRpcUrl saying what to write else."""
    problem = rpc_url_problem(rpc_url)
    if problem is not None:
        raise BadRpcUrl(problem)
    return rpc_url


def pending_block_time(w3: Web3, *, policy: RetryPolicy) -> int | None:
    """The pending block's timestamp: what a transaction sent now sees, also on a chain that
    mines only on transactions (whose latest block may be rounds old). None when the RPC serves
    no pending block; a transient failure raises as any read does."""
    try:
        block = call_with_retry(
            lambda: w3.eth.get_block("pending"),
            what="reading the pending block",
            endpoint=endpoint_of(w3),
            policy=policy,
        )
    except ChainError as exc:
        if exc.retryable:
            raise
        return None
    stamp = block.get("timestamp") if block else None
    return int(stamp) if isinstance(stamp, int) else None


def endpoint_of(w3: Web3) -> str:
    """The URL a Web3 talks to, for messages (``"the RPC"`` when unknown)."""
    return str(getattr(w3.provider, "endpoint_uri", None) or "the RPC")


def rpc_error_message(exc: BaseException) -> str:
    """The node's own error message from a JSON-RPC error response, else ``str(exc)``."""
    response = getattr(exc, "rpc_response", None) or {}
    error = response.get("error") if isinstance(response, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(exc)


def classify(exc: BaseException, *, what: str, endpoint: str) -> ChainError | None:
    """The chain error for an exception from web3/requests, or None when it is not a chain error.

    ``what`` names the operation ("reading peerInfo"), ``endpoint`` the RPC, both for the message.
    """
    if isinstance(exc, ChainError):
        return exc
    if isinstance(exc, (TransactionNotFound, BlockNotFound)):
        return None  # answers, not failures: callers handle them
    if isinstance(exc, ContractLogicError):
        return revert_from_web3(exc)
    if isinstance(
        exc,
        (
            requests.ConnectionError,
            requests.Timeout,
            ProviderConnectionError,
            RequestTimedOut,
            TooManyRequests,
            TimeoutError,
            ConnectionError,
        ),
    ):
        return RpcUnavailable(
            f"{what}: the RPC at {endpoint} is unreachable ({connection_failure(exc)}); check "
            "[chain] rpc_url and that the chain's node runs, or try another RPC"
        )
    if isinstance(exc, requests.HTTPError):
        return _classify_http(exc, what=what, endpoint=endpoint)
    if isinstance(exc, Web3RPCError):
        return _classify_rpc(exc, what=what, endpoint=endpoint)
    return None


def _retry_cause(error: ChainError, exc: BaseException) -> str:
    """The short reason in a retry line: why the connection failed, else the error's message."""
    if isinstance(error, RpcUnavailable) and not isinstance(exc, ChainError):
        return connection_failure(exc)
    return short(error, limit=120)


def revert_from_web3(exc: ContractLogicError) -> ContractRevert:
    """The ContractRevert for web3's ContractCustomError/ContractLogicError (``.data``: hex)."""
    if isinstance(exc.data, str) and exc.data.startswith("0x"):
        return decode_revert(exc.data)
    reason = (exc.message or "").removeprefix("execution reverted").lstrip(": ")
    return ContractRevert(reason=reason)


def _classify_http(exc: requests.HTTPError, *, what: str, endpoint: str) -> ChainError:
    status = exc.response.status_code if exc.response is not None else 0
    if status == 429 or status >= 500:
        return RpcUnavailable(
            f"{what}: the RPC at {endpoint} answered HTTP {status} (busy or failing); "
            "retry later or use another RPC"
        )
    return RpcError(f"{what}: the RPC at {endpoint} answered HTTP {status}; check the RPC URL")


def _classify_rpc(exc: Web3RPCError, *, what: str, endpoint: str) -> ChainError:
    message = rpc_error_message(exc)
    lowered = message.lower()
    if any(m in lowered for m in _NONCE_MESSAGES):
        return NonceConflict(
            f"{what}: {message} (another transaction from this account took the nonce)"
        )
    if "insufficient funds" in lowered:
        return InsufficientFunds(
            f"{what}: the account cannot pay for value plus gas ({message}); "
            "fund it with more ether"
        )
    if any(m in lowered for m in _RATE_LIMIT_MESSAGES):
        return RpcUnavailable(
            f"{what}: the RPC at {endpoint} is rate limiting ({message}); retry later"
        )
    if _names_pruned_state(lowered):
        return StateUnavailable(
            f"{what}: the RPC at {endpoint} no longer keeps that block's state ({message}); "
            "use an RPC of an archive node (one that keeps every block's state)"
        )
    return RpcError(f"{what}: the RPC at {endpoint} refused the request: {message}")


def _names_pruned_state(lowered: str) -> bool:
    """Whether an RPC error message (lower case) says the block's state was pruned."""
    if any(m in lowered for m in _PRUNED_STATE_MESSAGES):
        return True
    out_of_range = _ANVIL_OUT_OF_RANGE.search(lowered)
    return out_of_range is not None and int(out_of_range[2]) < int(out_of_range[1])


#: What a connection library's message means, by a telling part of it (checked in order).
_CONNECTION_FAILURES = (
    ("connection refused", "connection refused: nothing listens on that port"),
    ("name or service not known", "unknown host name"),
    ("nodename nor servname", "unknown host name"),
    ("temporary failure in name resolution", "the host name cannot be resolved now"),
    ("failed to resolve", "unknown host name"),
    ("network is unreachable", "network unreachable"),
    ("no route to host", "no route to host"),
    ("connection reset", "the connection was reset"),
    ("remote end closed", "the server closed the connection"),
    ("certificate", "its TLS certificate was refused"),
    ("timed out", "no answer within [chain] rpc_timeout"),
)


def connection_failure(exc: BaseException) -> str:
    """A few words for why a connection failed, instead of the library's nested message."""
    if isinstance(exc, (requests.Timeout, RequestTimedOut, TimeoutError)):
        return "no answer within [chain] rpc_timeout"
    text = str(exc).lower()
    for telling, meaning in _CONNECTION_FAILURES:
        if telling in text:
            return meaning
    if isinstance(exc, TooManyRequests):
        return "too many requests"
    return short(exc.__class__.__name__ + (f": {exc}" if str(exc) else ""), limit=80)


def short(exc: BaseException | str, *, limit: int = 200) -> str:
    """An error (or text) on one line of at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def call_with_retry(
    fn: Callable[[], T],
    *,
    what: str,
    endpoint: str,
    policy: RetryPolicy = DEFAULT_RETRY,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Runs ``fn``; web3 errors become chain errors; retryable ones are retried under ``policy``.

    The last retryable error is raised with "(gave up after N attempts)" appended to its message.
    """
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as exc:
            error = classify(exc, what=what, endpoint=endpoint)
            if error is None:
                raise
            if not error.retryable:
                raise error from exc
            if attempt == policy.attempts:
                error.args = (f"{error.args[0]} (gave up after {attempt} attempts)",)
                raise error from exc
            delay = policy.delay(attempt)
            cause = f"{endpoint}: {_retry_cause(error, exc)}"
            log.warning(policy.retry_line(what, cause, attempt, delay))
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
