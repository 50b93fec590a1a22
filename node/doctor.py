"""``swarm doctor``: every check a volunteer's node needs to pass, each with the fix to make.

``run_checks(config)`` returns one :class:`Check` per line, in this order: the deployment file,
the RPC (reachable, the deployment's chain id), the contract (code at the address, the deployment
block still there: not a reset chain), the keystore (unlocks with the configured password), the
peer (registered, active, stake at least the contract's ``minStake``), funds (gas for 100 rounds),
the clock (local time against the latest block), the content store (a folder is writable, a Kubo
API answers), the store's peers (a Kubo daemon connected to a peer whose endpoint was announced
on-chain, and this node's own announcement matching its daemon), memory and disk (node.resources).

A check that cannot run because an earlier one failed says so ("skipped"); only problems fail.
What the checks read from this machine (the time, memory, free disk) comes through
:class:`Probes`, so tests can shift the clock or shrink the memory.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import requests

from node.chain.client import CoordinatorClient
from node.chain.deployment import Deployment
from node.chain.errors import ChainError
from node.chain.models import PeerStatus
from node.chain.rpc import RetryPolicy, call_with_retry, connect, endpoint_of
from node.chain.units import format_eth
from node.config import NodeConfig
from node.identity import IdentityError, keystore_address, read_password, unlock_keystore
from node.resources import (
    GIB,
    Workload,
    available_memory,
    estimate_resources,
    free_disk,
    model_parameters,
)

Status = Literal["ok", "problem", "skipped"]

#: Gas of one round, the funds rule's unit: one publishRollouts (53,997 at most, README "Gas")
#: and one attest of up to 4 peers' batches (21,000 + 4 x 35,000, first attester of each).
ROUND_GAS = 54_000 + 21_000 + 4 * 35_000
#: Rounds the balance must pay for at today's prices (the node's: 2 x base fee + tip).
FUNDED_ROUNDS = 100
#: The clock may be off by a tenth of a round, and at least this many seconds: the latest block
#: is up to a block interval old (12 s on Ethereum, 24 s when a slot is missed).
MIN_CLOCK_TOLERANCE = 30
#: One doctor run retries a failing RPC call once: it diagnoses, it does not wait it out.
DOCTOR_RETRY = RetryPolicy(attempts=2, initial_delay=0.2, max_delay=0.5)


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, what was found, and the fix for a problem."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status.upper() if self.status == 'problem' else self.status:<8} "
        text += f"{self.name:<10} {self.detail}"
        return f"{text}. Fix: {self.fix}" if self.fix else text


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def problem(name: str, detail: str, fix: str) -> Check:
    return Check(name, "problem", detail, fix)


def skipped(name: str, detail: str) -> Check:
    return Check(name, "skipped", detail)


@dataclass(frozen=True)
class Probes:
    """What the checks read from this machine (replaceable in tests)."""

    now: Callable[[], float] = time.time
    memory_available: Callable[[], int | None] = available_memory
    disk_free: Callable[[Path], int] = free_disk


@dataclass
class _Run:
    """What the checks found so far (later checks build on earlier ones)."""

    config: NodeConfig
    probes: Probes
    deployment: Deployment | None = None
    client: CoordinatorClient | None = None
    contract: bool = False
    address: str | None = None


def run_checks(config: NodeConfig, *, probes: Probes | None = None) -> list[Check]:
    """Runs every check in order; a check that raises an error of the node becomes a problem."""
    run = _Run(config, probes or Probes())
    return [_guarded(check, run) for check in _CHECKS]


def failed(checks: list[Check]) -> list[Check]:
    return [check for check in checks if check.status == "problem"]


def _guarded(check: Callable[[_Run], Check], run: _Run) -> Check:
    try:
        return check(run)
    except Exception as exc:  # noqa: BLE001 - a diagnosis reports every failure as a line
        name = check.__name__.removeprefix("_check_")
        return problem(name, _short(exc), "do what the message says, then run swarm doctor again")


# ------------------------------------------------------------------------------ chain checks


def _check_deployment(run: _Run) -> Check:
    path = run.config.chain.deployment.expanduser()
    try:
        run.deployment = Deployment.load(path)
    except ChainError as exc:
        return problem("deployment", str(exc), "set [chain] deployment to the swarm's file")
    d = run.deployment
    return ok("deployment", f"{path}: coordinator {d.coordinator} on chain {d.chain_id}")


def _check_rpc(run: _Run) -> Check:
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


def _check_contract(run: _Run) -> Check:
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


def _check_keystore(run: _Run) -> Check:
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


def _check_peer(run: _Run) -> Check:
    client, address = run.client, run.address
    if client is None or not run.contract or address is None:
        return skipped("peer", "needs the contract and the keystore's address")
    info = client.peer_info(address)
    minimum = client.parameters().min_stake
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
            "after the unbonding period `swarm withdraw`, then a new key: swarm init --force, "
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


def _check_funds(run: _Run) -> Check:
    client, address = run.client, run.address
    if client is None or address is None:
        return skipped("funds", "needs the RPC and the keystore's address")
    w3 = client.w3
    balance, price = _chain_read(client, lambda: (w3.eth.get_balance(address), _gas_price(w3)))
    needed = FUNDED_ROUNDS * ROUND_GAS * price
    rule = (
        f"{FUNDED_ROUNDS} rounds of {ROUND_GAS:,} gas (a publish and an attest) at "
        f"{price / 1e9:.3g} gwei"
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


def _check_clock(run: _Run) -> Check:
    client, deployment = run.client, run.deployment
    if client is None or deployment is None:
        return skipped("clock", "needs the RPC")
    chain_time, duration = client.chain_time(), deployment.round_duration
    offset = run.probes.now() - chain_time
    tolerance = max(MIN_CLOCK_TOLERANCE, duration // 10)
    shown = f"this machine's clock is {abs(offset):.0f} s {'ahead of' if offset > 0 else 'behind'}"
    if abs(offset) > tolerance:
        return problem(
            "clock",
            f"{shown} the latest block (allowed: {tolerance} s, a tenth of the {duration} s "
            f"round, at least {MIN_CLOCK_TOLERANCE} s)",
            "sync this machine's clock (timedatectl set-ntp true); if it is right, the RPC is "
            "stuck or lagging: use another [chain] rpc_url",
        )
    return ok("clock", f"{shown} the latest block (allowed: {tolerance} s)")


# ------------------------------------------------------------------------------ store checks


def _check_store(run: _Run) -> Check:
    setting = run.config.storage.store
    if "://" in setting and not setting.startswith("file://"):
        return _check_kubo_api(setting, run.config.storage.fetch_timeout)
    folder = Path(setting.removeprefix("file://")).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        return problem(
            "store",
            f"the store folder {folder} is not writable ({exc.strerror})",
            "make it writable by this user, or set [storage] store to a writable folder",
        )
    return ok("store", f"local folder {folder} is writable (peers on other hosts cannot read it)")


def _check_kubo_api(url: str, timeout: float) -> Check:
    try:
        identity = _kubo(url, "id", timeout)
    except (requests.RequestException, ValueError) as exc:
        return problem(
            "store",
            f"the Kubo API at {url} does not answer /api/v0/id ({_kubo_failure(exc, timeout)})",
            "start the Kubo daemon (ipfs daemon), or set [storage] store to its API URL",
        )
    return ok("store", f"Kubo at {url} answers: peer id {identity.get('ID')}")


def _check_store_peers(run: _Run) -> Check:
    setting = run.config.storage.store
    if "://" not in setting or setting.startswith("file://"):
        return skipped("peers", "a local store folder has no peers (use a Kubo API to share)")
    if run.client is None or run.deployment is None:
        return skipped("peers", "needs the RPC")
    timeout = run.config.storage.fetch_timeout
    try:
        own_id = str(_kubo(setting, "id", timeout).get("ID"))
        peers = _kubo(setting, "swarm/peers", timeout).get("Peers") or []
    except (requests.RequestException, ValueError) as exc:
        return skipped("peers", f"needs the Kubo API ({_kubo_failure(exc, timeout)})")
    announced = _announced_peer_ids(run.client, run.deployment)
    if announced is None:
        return skipped("peers", "this software cannot read store announcements yet")
    own = announced.pop(run.address or "", None)
    if own != own_id:
        return problem(
            "peers",
            f"this node's announced store is {own or 'none'}, its Kubo daemon is {own_id}",
            "start the node (swarm run announces its Kubo endpoint when it starts)",
        )
    connected = {str(peer.get("Peer")) for peer in peers}
    others = set(announced.values())
    if not others:
        return skipped("peers", "no other peer has announced a store endpoint yet")
    if not connected & others:
        return problem(
            "peers",
            f"Kubo is connected to none of the {len(others)} peers that announced an endpoint",
            "keep swarm run running (it connects to announced peers) and open Kubo's swarm port "
            "(TCP, default 4001) to the internet; never open the API port",
        )
    return ok("peers", f"connected to {len(connected & others)} of {len(others)} announced peers")


def _announced_peer_ids(client: CoordinatorClient, deployment: Deployment) -> dict[str, str] | None:
    """The latest announced libp2p peer id of each peer (address -> id); None when this
    software has no announcement event."""
    try:
        from node.chain.events import EndpointAnnounced, EventReader  # type: ignore[attr-defined]
        from node.storage.endpoint import parse_endpoint  # type: ignore[attr-defined]
    except ImportError:
        return None
    reader = EventReader(client.w3, client.address)
    latest: dict[str, bytes] = {}
    for event in reader.read(
        deployment.deployment_block, client.block_number(), events=[EndpointAnnounced]
    ):
        latest[event.peer] = event.endpoint
    found = {}
    for peer, data in latest.items():
        try:
            found[peer] = parse_endpoint(data).peer_id
        except ValueError:
            continue
    return found


def _kubo(url: str, command: str, timeout: float) -> dict[str, Any]:
    base = url.rstrip("/")
    if not base.endswith("/api/v0"):
        base += "/api/v0"
    response = requests.post(f"{base}/{command}", timeout=timeout)
    response.raise_for_status()
    answer = response.json()
    if not isinstance(answer, dict):
        raise ValueError(f"unexpected answer {answer!r:.100}")
    return answer


def _kubo_failure(exc: BaseException, timeout: float) -> str:
    """A few words on why a Kubo API call failed."""
    if isinstance(exc, requests.Timeout):
        return f"no answer in {timeout:g} s"
    if isinstance(exc, requests.ConnectionError):
        return "nothing accepts connections there"
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}: not a Kubo RPC API?"
    return f"not a Kubo answer: {_short(exc)}"


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 160 else text[:157] + "..."


# ------------------------------------------------------------------------------ machine checks


def workload(config: NodeConfig) -> Workload | None:
    """The settings that decide memory and disk; None when the model's size cannot be told."""
    parameters = model_parameters(config.model.source)
    if parameters is None:
        return None
    tasks = config.tasks.tasks_per_round
    if tasks is None:
        from node.tasks.presets import get_preset  # reasoning-gym: loads only here

        tasks = get_preset(config.tasks.preset).tasks_per_round
    sampling = config.sampling
    return Workload(
        parameters=parameters,
        tasks_per_round=tasks,
        group_size=sampling.group_size,
        trained_groups=sampling.local_groups + sampling.external_groups,
        max_new_tokens=config.generation.max_new_tokens,
        micro_batch_size=config.training.micro_batch_size,
        lora_rank=config.training.lora_rank,
    )


def _check_memory(run: _Run) -> Check:
    work = workload(run.config)
    if work is None:
        return skipped("memory", f"cannot tell the size of model {run.config.model.source!r}")
    estimate = estimate_resources(work)
    available = run.probes.memory_available()
    settings = (
        f"G {work.group_size}, {work.tasks_per_round} tasks, max_new_tokens "
        f"{work.max_new_tokens}, micro_batch_size {work.micro_batch_size}"
    )
    if available is None:
        return skipped("memory", f"needs ~{estimate.summary()}; cannot read free memory here")
    if estimate.memory > available:
        return problem(
            "memory",
            f"{settings} need ~{estimate.summary()}, {available / GIB:.1f} GiB is available",
            "lower [training] micro_batch_size, [generation] max_new_tokens or [sampling] "
            "group_size, or free memory",
        )
    return ok("memory", f"{settings} need ~{estimate.memory / GIB:.1f} GiB of "
              f"{available / GIB:.1f} GiB available")  # fmt: skip


def _check_disk(run: _Run) -> Check:
    work = workload(run.config)
    if work is None:
        return skipped("disk", f"cannot tell the size of model {run.config.model.source!r}")
    estimate = estimate_resources(work)
    needs = [(run.config.model.checkpoint_dir, estimate.checkpoint_disk, "[model] checkpoint_dir")]
    setting = run.config.storage.store
    if "://" not in setting or setting.startswith("file://"):
        folder = Path(setting.removeprefix("file://"))
        needs.append((folder, estimate.store_disk, "[storage] store"))
    short = [
        (path, need, key)
        for path, need, key in needs
        if run.probes.disk_free(path.expanduser()) < need
    ]
    if short:
        path, need, key = short[0]
        return problem(
            "disk",
            f"{path} needs {need / 2**20:,.0f} MiB free, has "
            f"{run.probes.disk_free(path.expanduser()) / 2**20:,.0f} MiB",
            f"free space there or set {key} to a folder on a disk with room",
        )
    listed = ", ".join(f"{path} {need / 2**20:,.0f} MiB" for path, need, _ in needs)
    return ok("disk", f"room for {listed}")


_CHECKS: tuple[Callable[[_Run], Check], ...] = (
    _check_deployment,
    _check_rpc,
    _check_contract,
    _check_keystore,
    _check_peer,
    _check_funds,
    _check_clock,
    _check_store,
    _check_store_peers,
    _check_memory,
    _check_disk,
)


def report_lines(checks: list[Check]) -> Iterator[str]:
    """The report: one line per check, then a summary."""
    for check in checks:
        yield check.line()
    problems = failed(checks)
    yield (
        f"{len(problems)} problem(s): fix them and run swarm doctor again"
        if problems
        else "no problems found"
    )

