"""The transaction sender against a real Anvil: retries, nonces, receipts, reverts."""

from __future__ import annotations

import threading

import pytest
from eth_account import Account

from node.chain.client import CoordinatorClient
from node.chain.errors import (
    InsufficientFunds,
    MissingAccount,
    ReceiptTimeout,
    RetryableChainError,
    RpcUnavailable,
)
from node.chain.reverts import SwarmCoordinatorAlreadyPublished, SwarmCoordinatorInsufficientStake
from node.chain.rpc import RetryPolicy, connect
from node.chain.transactions import TransactionSender
from node.local.anvil import free_port
from tests.chain.helpers import ETHER, FlakyProxy, digest_of, register_all

pytestmark = pytest.mark.integration

QUICK = RetryPolicy(attempts=4, initial_delay=0.01, max_delay=0.05)


def _client(url: str, deployment, account=None, retry: RetryPolicy = QUICK) -> CoordinatorClient:
    w3 = connect(url, timeout=5)
    sender = TransactionSender(w3, account, retry=retry, poll_interval=0.01) if account else None
    return CoordinatorClient(w3, deployment.coordinator, sender=sender, retry=retry)


def test_unreachable_rpc_is_retryable_and_says_where(deployment) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = _client(
        url, deployment, retry=RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.02)
    )
    with pytest.raises(RpcUnavailable) as caught:
        client.current_round()
    assert isinstance(caught.value, RetryableChainError) and caught.value.retryable
    assert url in str(caught.value) and "gave up after 3 attempts" in str(caught.value)


def test_transient_http_failures_are_retried(chain, anvil, deployment, dev_accounts) -> None:
    plan = {
        "eth_call": [503, 429, "drop"],
        "eth_estimateGas": [502],
        "eth_sendRawTransaction": ["drop"],
    }
    with FlakyProxy(anvil.url, plan).running() as proxy:
        client = _client(proxy.url, deployment, dev_accounts[1])
        assert client.current_round() == chain.current_round()
        client.register("alice", ETHER)
        assert client.peer_info(dev_accounts[1].address).is_active
    assert proxy.seen.count("eth_call") >= 4 and proxy.seen.count("eth_sendRawTransaction") == 2


def test_a_send_whose_answer_was_lost_is_not_sent_twice(
    chain, anvil, deployment, dev_accounts, client_for
) -> None:
    with FlakyProxy(anvil.url, {"eth_sendRawTransaction": ["lost"]}).running() as proxy:
        client = _client(proxy.url, deployment, dev_accounts[1])
        client.register("alice", ETHER)
        client.add_stake(ETHER)
    assert chain.w3.eth.get_transaction_count(dev_accounts[1].address) == 2
    assert client_for().peer_info(dev_accounts[1].address).stake == 2 * ETHER


def test_nonce_taken_by_another_process_is_resynced(chain, client_for, dev_accounts) -> None:
    first = client_for(dev_accounts[1])
    second = client_for(dev_accounts[1])  # same key, own nonce counter: another process
    first.register("alice", ETHER)
    second.add_stake(ETHER)
    # first's counter is stale: nonce too low -> resync -> resend. (The amounts differ: a
    # byte-identical transaction already on chain would count as this one having landed.)
    first.add_stake(2 * ETHER)
    assert first.peer_info(dev_accounts[1].address).stake == 4 * ETHER
    assert chain.w3.eth.get_transaction_count(dev_accounts[1].address) == 3


def test_a_revert_at_estimation_does_not_use_the_nonce(chain, client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    with pytest.raises(SwarmCoordinatorInsufficientStake):
        client.register("alice", 1)
    assert chain.w3.eth.get_transaction_count(dev_accounts[1].address) == 0
    client.register("alice", ETHER)
    assert chain.w3.eth.get_transaction_count(dev_accounts[1].address) == 1


def test_a_mined_revert_is_replayed_for_its_reason_and_uses_its_nonce(
    chain, client_for, dev_accounts
) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    round_ = chain.current_round()
    peer.transact("publishRollouts", round_, digest_of("a"), 1, 8, 0, gas=200_000)
    with pytest.raises(SwarmCoordinatorAlreadyPublished) as caught:
        peer.transact("publishRollouts", round_, digest_of("b"), 1, 8, 0, gas=200_000)
    assert caught.value.tx_hash and caught.value.tx_hash in str(caught.value)
    receipt = chain.w3.eth.get_transaction_receipt(caught.value.tx_hash)
    assert receipt["status"] == 0
    assert chain.w3.eth.get_transaction_count(dev_accounts[1].address) == 3
    peer.add_stake(ETHER)  # the local nonce moved on with the mined revert
    assert chain.w3.eth.get_transaction_count(dev_accounts[1].address) == 4


def test_out_of_gas_is_reported_as_such(chain, client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1])
    with pytest.raises(Exception, match="ran out of gas") as caught:
        client.transact("register", "alice", value=ETHER, gas=30_000)
    assert caught.value.tx_hash


def test_receipt_timeout_is_retryable_and_resyncs(chain, client_for, dev_accounts) -> None:
    client = client_for(dev_accounts[1], receipt_timeout=0.3)
    chain.rpc("evm_setAutomine", False)
    try:
        with pytest.raises(ReceiptTimeout) as caught:
            client.register("alice", ETHER)
    finally:
        chain.rpc("evm_setAutomine", True)
    assert caught.value.retryable and caught.value.tx_hash in str(caught.value)
    chain.mine()
    assert chain.w3.eth.get_transaction_receipt(caught.value.tx_hash)["status"] == 1
    client.add_stake(ETHER)
    assert client.peer_info(dev_accounts[1].address).stake == 2 * ETHER


def test_threads_share_one_sender(chain, client_for, dev_accounts) -> None:
    (peer,) = register_all(client_for, dev_accounts[1:2])
    errors: list[BaseException] = []

    def top_up() -> None:
        try:
            peer.add_stake(ETHER)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=top_up) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert peer.peer_info(dev_accounts[1].address).stake == 7 * ETHER


def test_insufficient_funds_is_explained(chain, client_for) -> None:
    poor = Account.create()
    chain.fund(poor.address, ETHER // 10)
    with pytest.raises(InsufficientFunds, match="fund it"):
        client_for(poor).register("poor", ETHER)


def test_read_only_client_refuses_to_send(client_for) -> None:
    with pytest.raises(MissingAccount, match="read-only"):
        client_for().request_exit()
