"""Talking to an RPC node: building the Web3 object, sorting its exceptions into the chain error
family, and retrying transient failures with exponential backoff.

web3.py's own HTTP retries are switched off so there is one retry policy, ours, applied only to
errors that are transient (:class:`~node.chain.errors.RetryableChainError`).
"""

from __future__ import annotations

import logging
import random
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
            f"{what}: the RPC at {endpoint} is unreachable or timed out ({_short(exc)}); "
            "check the URL and your connection, or try another RPC"
        )
    if isinstance(exc, requests.HTTPError):
        return _classify_http(exc, what=what, endpoint=endpoint)
    if isinstance(exc, Web3RPCError):
        return _classify_rpc(exc, what=what, endpoint=endpoint)
    return None


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
    return RpcError(f"{what}: the RPC at {endpoint} refused the request: {message}")


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:197] + "..."


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
            log.warning(
                "%s failed (attempt %d/%d), retrying in %.2fs: %s",
                what,
                attempt,
                policy.attempts,
                delay,
                error,
            )
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
