"""The chain-side checks: deployment file, RPC and chain id, contract, keystore, peer, funds,
clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.errors import ChainError
from node.chain.models import PeerStatus
from node.chain.rpc import RetryPolicy, call_with_retry, connect, endpoint_of
from node.chain.units import format_eth
from node.doctor.base import Check, Run, ok, problem, skipped
from node.identity import IdentityError, keystore_address, read_password, unlock_keystore

#: Gas of one round, the funds rule's unit: one publishRollouts (55,000 at most), one
#: commitVerdicts (50,000) and one revealVerdicts of up to 8 batches (30,000 per item), the
#: protocol's gas budgets (docs/PROTOCOL.md); sealing and settling are occasional.
ROUND_GAS = 55_000 + 50_000 + 8 * 30_000
#: Rounds the balance must pay for at today's prices (the node's: 2 x base fee + tip).
FUNDED_ROUNDS = 100
#: The clock may be off by a tenth of a round, and at least this many seconds: the latest block
#: is up to a block interval old (12 s on Ethereum, 24 s when a slot is missed).
MIN_CLOCK_TOLERANCE = 30
#: One doctor run retries a failing RPC call once: it diagnoses, it does not wait it out.
DOCTOR_RETRY = RetryPolicy(attempts=2, initial_delay=0.2, max_delay=0.5)


def check_deployment(run: Run) -> Check:
    path = run.config.chain.deployment.expanduser()
    try:
        run.deployment = Deployment.load(path)
    except ChainError as exc:
        return problem("deployment", str(exc), "set [chain] deployment to the swarm's file")
    d = run.deployment
    return ok("deployment", f"{path}: coordinator {d.coordinator} on chain {d.chain_id}")


def check_rpc(run: Run) -> Check:
    if run.deployment is None:
        return skipped("rpc", "needs the deployment file")
    url, timeout = run.config.chain.rpc_url, run.config.chain.rpc_timeout
    client = CoordinatorClient(connect(url, timeout=timeout), run.deployment.coordinator)
    client.retry = DOCTOR_RETRY
    try:
        chain_id = client.chain_id
    except ChainError as exc:
        return problem(
            "rpc", str(exc), "set [chain] rpc_url to an RPC that answers (and rpc_timeout)"
        )
    expected = run.deployment.chain_id
    if chain_id != expected:
        return problem(
            "rpc",
            f"{url} serves chain {chain_id}, the deployment file is for chain {expected}",
            f"set [chain] rpc_url to an RPC of chain {expected}, or [chain] deployment to the "
            f"deployment file of chain {chain_id}",
        )
    run.client = client
    return ok("rpc", f"{url} answers, chain {chain_id}, block {client.block_number()}")


def check_contract(run: Run) -> Check:
    client, deployment = run.client, run.deployment
    if client is None or deployment is None:
        return skipped("contract", "needs the RPC")
    if not client.has_code():
        return problem(
            "contract",
            f"no contract code at {deployment.coordinator} on chain {deployment.chain_id}",
            "get the current deployment file of the swarm (or redeploy: swarm-deploy) and set "
            "[chain] deployment to it",
        )
    block = deployment.deployment_block
    found = client.block_hash(block)
    if found != deployment.block_hash:
        return problem(
            "contract",
            f"the chain was reset: block {block} is {found or 'missing'}, the deployment was "
            f"made in {deployment.block_hash}",
            "get the new deployment file (or redeploy: swarm-deploy), then register again",
        )
    run.contract = True
    return ok("contract", f"code at {deployment.coordinator}, deployed in block {block}")


# ------------------------------------------------------------------------------ identity checks


def check_keystore(run: Run) -> Check:
    identity = run.config.identity
    path = identity.keystore.expanduser()
    try:
        run.address = keystore_address(path)
    except IdentityError as exc:
        return problem("keystore", str(exc), "swarm init, or set [identity] keystore to yours")
    file = identity.password_file.expanduser() if identity.password_file else None
    password_fix = (
        f"write the password on the first line of {file} ([identity] password_file)"
        if file
        else f"export {identity.password_env}=..., or set [identity] password_file"
    )
    password = read_password(env=identity.password_env, file=file)
    if password is None:
        return problem(
            "keystore",
            f"no password for {path}: neither [identity] password_file nor "
            f"${identity.password_env} is set (a service cannot answer a prompt)",
            password_fix,
        )
    try:
        unlock_keystore(path, password)
    except IdentityError as exc:
        return problem("keystore", str(exc), password_fix)
    return ok("keystore", f"{path} unlocks: peer {run.address}")


def check_peer(run: Run) -> Check:
    client, address = run.client, run.address
    if client is None or not run.contract or address is None:
        return skipped("peer", "needs the contract and the keystore's address")
    info = client.peer_info(address)
    minimum = client.min_stake()
    if info.status is PeerStatus.NONE:
        return problem(
            "peer",
            f"{address} is not registered",
            f"swarm register --name NAME --stake AMOUNT (at least {format_eth(minimum)})",
        )
    if info.status is not PeerStatus.ACTIVE:
        return problem(
            "peer",
            f"{address} is {info.status.name.lower()}: it left the swarm",
            "once its last rounds are judged `swarm withdraw`, then a new key: swarm init --force, "
            "swarm register",
        )
    if info.stake < minimum:
        return problem(
            "peer",
            f"stake {format_eth(info.stake)} is below the minimum {format_eth(minimum)} "
            "(the contract refuses its batches)",
            f"swarm add-stake --amount '{format_eth(minimum - info.stake)}'",
        )
    return ok("peer", f"active, stake {format_eth(info.stake)} (minimum {format_eth(minimum)})")


def check_funds(run: Run) -> Check:
    client, address = run.client, run.address
    if client is None or address is None:
        return skipped("funds", "needs the RPC and the keystore's address")
    w3 = client.w3
    balance, price, deposit = _chain_read(
        client,
        lambda: (w3.eth.get_balance(address), _gas_price(w3), client.cached_commit_deposit),
    )
    # Commitments of the commit phases in flight hold a deposit each until their reveals.
    deposits = client.cached_phases.commit_rounds + client.cached_phases.reveal_rounds
    needed = FUNDED_ROUNDS * ROUND_GAS * price + deposits * deposit
    rule = (
        f"{FUNDED_ROUNDS} rounds of {ROUND_GAS:,} gas (a publish, a commit and a reveal) at "
        f"{price / 1e9:.3g} gwei, and {deposits} commit deposits of {format_eth(deposit)} "
        "(each sent back by its reveal)"
    )
    if balance < needed:
        return problem(
            "funds",
            f"balance {format_eth(balance)} is below {format_eth(needed)}: {rule}",
            f"send at least {format_eth(needed - balance)} to {address}",
        )
    return ok("funds", f"balance {format_eth(balance)} pays for {rule}")


def _gas_price(w3: Any) -> int:
    """What the node pays per gas at most (node.chain.transactions: 2 x base fee + tip)."""
    base_fee = w3.eth.get_block("latest").get("baseFeePerGas")
    if base_fee is None:
        return int(w3.eth.gas_price)
    return 2 * int(base_fee) + int(w3.eth.max_priority_fee)


def _chain_read(client: CoordinatorClient, fn: Callable[[], Any]) -> Any:
    return call_with_retry(fn, what="reading", endpoint=endpoint_of(client.w3), policy=client.retry)


def check_clock(run: Run) -> Check:
    client, deployment = run.client, run.deployment
    if client is None or deployment is None:
        return skipped("clock", "needs the RPC")
    chain_time, duration = client.next_block_time(), deployment.round_duration
    offset = run.probes.now() - chain_time
    tolerance = max(MIN_CLOCK_TOLERANCE, duration // 10)
    shown = f"this machine's clock is {abs(offset):.0f} s {'ahead of' if offset > 0 else 'behind'}"
    if abs(offset) <= tolerance:
        return ok("clock", f"{shown} the chain's (allowed: {tolerance} s)")
    if offset < 0 and deployment.clock == "jumps":
        return ok(
            "clock",
            f"the demo chain's clock is {-offset:.0f} s ahead of this machine's: the local demo "
            "moves it forward a round at a time, and nodes follow the chain's clock",
        )
    return problem(
        "clock",
        f"{shown} the chain's (allowed: {tolerance} s, a tenth of the {duration} s "
        f"round, at least {MIN_CLOCK_TOLERANCE} s)",
        "sync this machine's clock (timedatectl set-ntp true); if it is right, the RPC is "
        "stuck or lagging: use another [chain] rpc_url",
    )
