"""Sending transactions from a local key: nonce, gas, fees, signing, receipt, and decoded reverts.

One :class:`TransactionSender` per account and process. Its life cycle for one transaction:

1. under a lock: take the next nonce (read from the chain's pending count the first time, kept
   locally after that), estimate gas on the pending block (a revert here is decoded and raised:
   the nonce is not used),
   add a safety margin, price it (EIP-1559: ``2 * baseFee + tip``; legacy gas price where the chain
   has no base fee), sign locally and send the raw bytes; only a sent transaction advances the
   nonce;
2. outside the lock: poll for the receipt until ``receipt_timeout``;
3. a receipt with status 0 is replayed with ``eth_call`` on the parent block to recover its reason.

Transient RPC failures are retried with exponential backoff (``RetryPolicy``); a nonce conflict
(another process used the account, or the local counter went stale) resyncs the nonce from the
chain and signs again; a send whose answer was lost is recognised by its hash when resent.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

from eth_account.datastructures import SignedTransaction
from eth_account.signers.local import LocalAccount
from eth_typing import ChecksumAddress
from hexbytes import HexBytes
from web3 import Web3
from web3.exceptions import TransactionNotFound
from web3.types import TxParams

from node.chain.errors import ChainError, ContractRevert, NonceConflict, ReceiptTimeout
from node.chain.models import TxReceipt
from node.chain.rpc import (
    DEFAULT_RETRY,
    RetryPolicy,
    call_with_retry,
    endpoint_of,
    pending_block_time,
)

log = logging.getLogger(__name__)


class TransactionSender:
    """Signs and sends an account's transactions; safe to share between threads."""

    def __init__(
        self,
        w3: Web3,
        account: LocalAccount,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        gas_margin: float = 1.25,
        receipt_timeout: float = 120.0,
        poll_interval: float = 0.5,
        max_priority_fee: int | None = None,
        nonce_attempts: int = 3,
    ) -> None:
        self.w3 = w3
        self.account = account
        self.retry = retry
        self.gas_margin = gas_margin
        self.receipt_timeout = receipt_timeout
        self.poll_interval = poll_interval
        self.max_priority_fee = max_priority_fee
        self.nonce_attempts = nonce_attempts
        self._lock = threading.Lock()
        self._next_nonce: int | None = None
        self._chain_id: int | None = None

    @property
    def address(self) -> ChecksumAddress:
        return self.account.address

    # ------------------------------------------------------------------------------ public

    def send(
        self,
        *,
        to: str | None,
        data: bytes,
        value: int = 0,
        gas: int | None = None,
        what: str = "transaction",
    ) -> TxReceipt:
        """Sends a transaction and waits for it; returns its receipt or raises a ChainError.

        ``to=None`` deploys ``data`` as creation code. ``gas`` skips estimation (the transaction is
        then sent even if it will revert, and its revert is recovered from the mined receipt).
        """
        for attempt in range(1, self.nonce_attempts + 1):
            try:
                signed, request = self._submit(to=to, data=data, value=value, gas=gas, what=what)
                break
            except NonceConflict:
                if attempt == self.nonce_attempts:
                    raise
                log.info("%s: nonce conflict, resyncing from the chain (attempt %d)", what, attempt)
                self.resync_nonce()
        return self._confirm(signed, request, what)

    def resync_nonce(self) -> None:
        """Forgets the local nonce: the next transaction reads it from the chain again."""
        with self._lock:
            self._next_nonce = None

    def chain_now(self) -> int | None:
        """The pending block's timestamp (what a transaction sent now sees), else the latest
        block's; None when the RPC does not answer."""
        try:
            pending = pending_block_time(self.w3, policy=self.retry)
            if pending is not None:
                return pending
            return int(
                self._rpc(lambda: self.w3.eth.get_block("latest")["timestamp"], "reading the time")
            )
        except ChainError:
            return None

    # ------------------------------------------------------------------------------ steps

    def _submit(
        self, *, to: str | None, data: bytes, value: int, gas: int | None, what: str
    ) -> tuple[SignedTransaction, dict[str, Any]]:
        with self._lock:
            request: dict[str, Any] = {"from": self.address, "data": HexBytes(data), "value": value}
            if to is not None:
                request["to"] = to
            tx = dict(
                request,
                nonce=self._nonce(),
                chainId=self._chain(),
                gas=gas or self._estimate(request, what),
            )
            tx.update(self._fees())
            del tx["from"]
            signed = self.account.sign_transaction(tx)
            self._send_raw(signed, what)
            self._next_nonce = tx["nonce"] + 1
            request["gas"] = tx["gas"]
        log.debug("%s sent: %s (nonce %d)", what, signed.hash.to_0x_hex(), tx["nonce"])
        return signed, request

    def _nonce(self) -> int:
        if self._next_nonce is None:
            self._next_nonce = int(
                self._rpc(
                    lambda: self.w3.eth.get_transaction_count(self.address, "pending"),
                    "reading the nonce",
                )
            )
        return self._next_nonce

    def _chain(self) -> int:
        if self._chain_id is None:
            self._chain_id = int(self._rpc(lambda: self.w3.eth.chain_id, "reading the chain id"))
        return self._chain_id

    def _estimate(self, request: dict[str, Any], what: str) -> int:
        try:  # on the pending block: the one the transaction joins (an idle chain's latest
            # block may lie rounds in the past)
            estimate = self._rpc(
                lambda: self.w3.eth.estimate_gas(cast(TxParams, request), "pending"),
                f"{what}: estimating gas",
            )
        except ContractRevert as revert:
            raise revert.with_context(now=self.chain_now()) from None
        return int(estimate * self.gas_margin)

    def _fees(self) -> dict[str, int]:
        block = self._rpc(lambda: self.w3.eth.get_block("latest"), "reading the base fee")
        base_fee = block.get("baseFeePerGas")
        if base_fee is None:
            return {
                "gasPrice": int(self._rpc(lambda: self.w3.eth.gas_price, "reading the gas price"))
            }
        tip = self.max_priority_fee
        if tip is None:
            tip = int(self._rpc(lambda: self.w3.eth.max_priority_fee, "reading the priority fee"))
        return {"maxFeePerGas": 2 * base_fee + tip, "maxPriorityFeePerGas": tip, "type": 2}

    def _send_raw(self, signed: SignedTransaction, what: str) -> None:
        try:
            self._rpc(
                lambda: self.w3.eth.send_raw_transaction(signed.raw_transaction), f"{what}: sending"
            )
        except NonceConflict:
            if not self._is_known(signed.hash):  # our own earlier attempt may have landed
                raise

    def _is_known(self, tx_hash: HexBytes) -> bool:
        try:
            self.w3.eth.get_transaction(tx_hash)
            return True
        except TransactionNotFound:
            return False
        except Exception:  # noqa: BLE001 - an unanswered check means "not known"
            return False

    def _confirm(self, signed: SignedTransaction, request: dict[str, Any], what: str) -> TxReceipt:
        receipt = self._wait_for_receipt(signed.hash, what)
        if receipt["status"] == 1:
            return TxReceipt.from_web3(receipt)
        raise self._replay_revert(request, receipt, what)

    def _wait_for_receipt(self, tx_hash: HexBytes, what: str) -> Any:
        deadline = time.monotonic() + self.receipt_timeout
        while True:
            try:
                return self._rpc(
                    lambda: self.w3.eth.get_transaction_receipt(tx_hash),
                    f"{what}: awaiting receipt",
                )
            except TransactionNotFound:
                pass
            if time.monotonic() >= deadline:
                # The transaction may have been dropped: do not build on its nonce.
                self.resync_nonce()
                raise ReceiptTimeout(
                    f"{what}: transaction {tx_hash.to_0x_hex()} was sent but not mined within "
                    f"{self.receipt_timeout:g} s; it may still land (check it on a block explorer) "
                    "or have "
                    "been dropped (fees too low?)",
                    tx_hash.to_0x_hex(),
                )
            time.sleep(self.poll_interval)

    def _replay_revert(self, request: dict[str, Any], receipt: Any, what: str) -> ContractRevert:
        tx_hash = receipt["transactionHash"].to_0x_hex()
        block = receipt["blockNumber"]
        replay = {
            key: value for key, value in request.items() if key != "gas"
        }  # out-of-gas shows below
        try:
            self._rpc(
                lambda: self.w3.eth.call(cast(TxParams, replay), block - 1),
                f"{what}: replaying the reverted transaction",
            )
        except ContractRevert as revert:
            return revert.with_context(now=self.chain_now(), tx_hash=tx_hash)
        except ChainError as exc:
            return ContractRevert(
                reason=f"{what} reverted in block {block}; replaying it failed: {exc}",
                tx_hash=tx_hash,
            )
        if receipt["gasUsed"] >= request["gas"]:
            reason = f"{what} ran out of gas (it used all {receipt['gasUsed']} gas it was given)"
            return ContractRevert(reason=reason, tx_hash=tx_hash)
        # An earlier transaction of the same block changed the state (two peers settling the same
        # dispute, say): replayed on the state after the block, the call names the reason.
        after = {key: value for key, value in replay.items() if key != "nonce"}  # it was used
        try:
            self._rpc(
                lambda: self.w3.eth.call(cast(TxParams, after), block),
                f"{what}: replaying the reverted transaction after its block",
            )
        except ContractRevert as revert:
            return revert.with_context(now=self.chain_now(), tx_hash=tx_hash)
        except ChainError:
            pass
        reason = (
            f"{what} reverted in block {block}, but replaying it on the block before succeeds: "
            "the state changed in between (another transaction in the same block?)"
        )
        return ContractRevert(reason=reason, tx_hash=tx_hash)

    def _rpc(self, fn: Any, what: str) -> Any:
        return call_with_retry(fn, what=what, endpoint=endpoint_of(self.w3), policy=self.retry)
