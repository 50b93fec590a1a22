"""``CoordinatorClient``: one typed Python method per SwarmCoordinator function.

Reads return typed values (``PeerInfo``, ``Verdict``, ``Rules``, ``SealInfo``, ints, bytes, addresses) and
retry transient RPC failures; writes go through a :class:`TransactionSender` and return a
:class:`TxReceipt` (hash, block, gas used) or raise a :class:`ChainError` (a revert arrives as the
``ContractRevert`` subclass named after the Solidity error). Method names are the Solidity names in
snake_case (``publishRolloutsFor`` -> ``publish_rollouts_for``, ``PUBLISH_TYPEHASH`` ->
``publish_typehash``).

    client = CoordinatorClient.connect("http://127.0.0.1:8545", deployment, account=account)
    client.register("alice", stake_wei=10**18)
    round_ = client.current_round()
    client.publish_rollouts(round_, digest, groups=8, completions=64, reward_sum=1234)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3

from node.chain.abi import load_abi
from node.chain.committee import sort_items
from node.chain.deployment import Deployment
from node.chain.eip712 import Domain, sign_publish
from node.chain.errors import DeploymentFileError, MissingAccount
from node.chain.models import (
    ZERO_ADDRESS,
    PeerInfo,
    Phases,
    Rules,
    SealInfo,
    TxReceipt,
    Verdict,
    VerdictItem,
)
from node.chain.rounds import RoundClock
from node.chain.rpc import (
    DEFAULT_RETRY,
    RetryPolicy,
    call_with_retry,
    connect,
    endpoint_of,
    pending_block_time,
)
from node.chain.transactions import TransactionSender

#: How long a Publish signature stays valid by default (seconds after the chain's time).
DEFAULT_SIGNATURE_LIFETIME = 3600


# Gas of the seal call that draws the beacon: a fixed part, and two cold reads per round delta.
_SEAL_DRAW_GAS = 90_000
_GAS_PER_DELTA = 6_000


class CoordinatorClient:
    """Typed access to one deployed SwarmCoordinator, optionally as one account."""

    def __init__(
        self,
        w3: Web3,
        address: str,
        *,
        account: LocalAccount | None = None,
        sender: TransactionSender | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.w3 = w3
        self.address = to_checksum_address(address)
        self.contract = w3.eth.contract(address=self.address, abi=load_abi())
        self.retry = retry
        if sender is None and account is not None:
            sender = TransactionSender(w3, account, retry=retry)
        self.sender = sender

    @classmethod
    def connect(
        cls,
        rpc_url: str,
        deployment: Deployment | str,
        *,
        account: LocalAccount | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> CoordinatorClient:
        """A client over HTTP for a deployment record (checked against the chain) or an address."""
        w3 = connect(rpc_url, timeout=timeout)
        if isinstance(deployment, str):
            return cls(w3, deployment, account=account, retry=retry)
        client = cls(w3, deployment.coordinator, account=account, retry=retry)
        client.check_deployment(deployment)
        return client

    def check_deployment(self, deployment: Deployment) -> None:
        """Raises DeploymentFileError when the RPC's chain is not the deployment's."""
        chain_id = self.chain_id
        if chain_id != deployment.chain_id:
            raise DeploymentFileError(
                f"the deployment is for chain {deployment.chain_id} but {endpoint_of(self.w3)} "
                f"serves chain {chain_id}: set [chain] rpc_url to an RPC of chain "
                f"{deployment.chain_id}, or [chain] deployment to the deployment file of chain "
                f"{chain_id}"
            )

    # -------------------------------------------------------------------------- chain context

    @cached_property
    def chain_id(self) -> int:
        return int(self._rpc(lambda: self.w3.eth.chain_id, "reading the chain id"))

    @cached_property
    def domain(self) -> Domain:
        """The EIP-712 domain (this chain, this coordinator, its genesis seed as salt)."""
        return Domain(
            chain_id=self.chain_id, verifying_contract=self.address, salt=self.genesis_seed()
        )

    @cached_property
    def clock(self) -> RoundClock:
        """Round arithmetic of this deployment (genesis and duration are immutable)."""
        return RoundClock(genesis=self.genesis(), duration=self.round_duration())

    @cached_property
    def cached_phases(self) -> Phases:
        """The deployment's phases, read once (they are immutable)."""
        return self.phases()

    @cached_property
    def cached_commit_deposit(self) -> int:
        """The commit deposit, read once (it is immutable)."""
        return self.commit_deposit()

    @property
    def account_address(self) -> str | None:
        return self.sender.address if self.sender else None

    def chain_time(self) -> int:
        """The latest block's timestamp (the contract's notion of now)."""
        return int(
            self._rpc(lambda: self.w3.eth.get_block("latest")["timestamp"], "reading the time")
        )

    def next_block_time(self) -> int:
        """The timestamp the next block will carry, hence what a transaction sent now sees: the
        pending block's when the RPC serves one (Anvil and Geth do, also on a chain that mines
        only on transactions, whose latest block may be hours old), never before the latest
        block's."""
        latest = self.chain_time()
        pending = pending_block_time(self.w3, policy=self.retry)
        return latest if pending is None else max(latest, pending)

    def round_now(self) -> int:
        """The round a transaction sent now lands in (``currentRound`` of the next block)."""
        return self.clock.round_at(self.next_block_time())

    def latest_block(self) -> tuple[int, int]:
        """Number and timestamp of the latest block."""
        block = self._rpc(lambda: self.w3.eth.get_block("latest"), "reading the latest block")
        return int(block["number"]), int(block["timestamp"])

    def block_number(self) -> int:
        return int(self._rpc(lambda: self.w3.eth.block_number, "reading the block number"))

    def block_hash(self, number: int) -> str | None:
        """``0x``-hex hash of block ``number``; None when the chain has no such block (yet)."""

        def read() -> str | None:
            if number > self.w3.eth.block_number:
                return None
            return "0x" + bytes(self.w3.eth.get_block(number)["hash"]).hex()

        return self._rpc(read, f"reading block {number}")  # type: ignore[no-any-return]

    def has_code(self) -> bool:
        """Whether a contract lives at the coordinator's address."""
        return bool(self._rpc(lambda: self.w3.eth.get_code(self.address), "reading contract code"))

    def sign_publish(
        self,
        round: int,
        digest: bytes,
        groups: int,
        completions: int,
        reward_sum: int,
        *,
        relayer: str = ZERO_ADDRESS,
        deadline: int | None = None,
    ) -> bytes:
        """This account's EIP-712 ``Publish`` signature, which ``relayer`` (anyone if zero) may
        send until ``deadline`` (unix time; default: chain time + DEFAULT_SIGNATURE_LIFETIME)."""
        account = self._sender().account
        if deadline is None:
            deadline = self.chain_time() + DEFAULT_SIGNATURE_LIFETIME
        return sign_publish(
            account,
            self.domain,
            round=round,
            digest=digest,
            groups=groups,
            completions=completions,
            reward_sum=reward_sum,
            relayer=relayer,
            deadline=deadline,
        )

    # -------------------------------------------------------------------------- peers and stake

    def register(self, name: str, stake_wei: int) -> TxReceipt:
        """Registers this account as peer ``name`` (1-32 UTF-8 bytes), staking ``stake_wei``."""
        return self.transact("register", name, value=stake_wei)

    def add_stake(self, amount_wei: int) -> TxReceipt:
        return self.transact("addStake", value=amount_wei)

    def request_exit(self) -> TxReceipt:
        return self.transact("requestExit")

    def withdraw(self) -> TxReceipt:
        """Pays an exiting peer its stake once its last rounds can no longer be judged."""
        return self.transact("withdraw")

    def claim(self) -> TxReceipt:
        """Sends this account its claimable wei (rewards, tips, forfeited bonds)."""
        return self.transact("claim")

    def announce_endpoint(self, endpoint: bytes) -> TxReceipt:
        """Announces this peer's store endpoint (node.storage.endpoint's encoding, at most
        ``max_endpoint_bytes()``); empty bytes withdraw it. Emits ``EndpointAnnounced``."""
        return self.transact("announceEndpoint", bytes(endpoint))

    def max_endpoint_bytes(self) -> int:
        """The most bytes ``announce_endpoint`` takes (the contract's ``MAX_ENDPOINT_BYTES``)."""
        return int(self._call("MAX_ENDPOINT_BYTES"))

    def peer_info(self, peer: str) -> PeerInfo:
        return PeerInfo.from_abi(self._call("peerInfo", to_checksum_address(peer)))

    def weight_at(self, peer: str, round: int) -> int:
        """The stake of ``peer`` that counts as voting weight for ``round`` (0: may not judge)."""
        return int(self._call("weightAt", to_checksum_address(peer), round))

    def claimable(self, account: str) -> int:
        """Wei ``account`` may take out with ``claim``."""
        return int(self._call("claimable", to_checksum_address(account)))

    # -------------------------------------------------------------------------- rounds

    def current_round(self) -> int:
        return int(self._call("currentRound"))

    def round_seed(self, round: int) -> bytes:
        return bytes(self._call("roundSeed", round))

    def genesis(self) -> int:
        return int(self._call("genesis"))

    def round_duration(self) -> int:
        return int(self._call("roundDuration"))

    def genesis_seed(self) -> bytes:
        return bytes(self._call("genesisSeed"))

    def grace_rounds(self) -> int:
        return int(self._call("graceRounds"))

    def commit_rounds(self) -> int:
        return int(self._call("commitRounds"))

    def reveal_rounds(self) -> int:
        return int(self._call("revealRounds"))

    def max_phase_rounds(self) -> int:
        """The most rounds one phase may last (the contract's ``MAX_PHASE_ROUNDS``)."""
        return int(self._call("MAX_PHASE_ROUNDS"))

    def phases(self) -> Phases:
        """The immutable grace, commit and reveal rounds (see ``cached_phases``)."""
        return Phases(
            grace_rounds=self.grace_rounds(),
            commit_rounds=self.commit_rounds(),
            reveal_rounds=self.reveal_rounds(),
        )

    # -------------------------------------------------------------------------- publications

    def publish_rollouts(
        self, round: int, digest: bytes, groups: int, completions: int, reward_sum: int
    ) -> TxReceipt:
        """Commits this account's batch of ``round`` by its SHA-256 ``digest``."""
        return self.transact("publishRollouts", round, digest, groups, completions, reward_sum)

    def publish_rollouts_for(
        self,
        peer: str,
        round: int,
        digest: bytes,
        groups: int,
        completions: int,
        reward_sum: int,
        relayer: str,
        deadline: int,
        signature: bytes,
    ) -> TxReceipt:
        """Commits ``peer``'s batch with its ``Publish`` signature (which names ``relayer`` and
        ``deadline``); this account pays the gas."""
        return self.transact(
            "publishRolloutsFor",
            to_checksum_address(peer),
            round,
            digest,
            groups,
            completions,
            reward_sum,
            to_checksum_address(relayer),
            deadline,
            signature,
        )

    publish_for = publish_rollouts_for

    # ------------------------------------------------------------------- committees and verdicts

    def seal_round(self, round: int) -> TxReceipt:
        """Draws ``round``'s committee (anyone, during its commit phase): the first ``sealRound``
        fixes the beacon block (the block it is mined in), a second one, necessarily in a later
        block since it is sent after the first is mined, draws the beacon from that block's hash.
        Returns the receipt of the call that drew it."""
        receipt = self.transact("sealRound", round)
        if self.seal(round) is not None:
            return receipt
        # Not estimated: an estimate runs in the latest block, which on a chain that mines only on
        # transactions is still the beacon block (BeaconPending). A revert is read from the receipt.
        phases = self.cached_phases
        rounds_summed = phases.grace_rounds + phases.commit_rounds + 2
        gas = _SEAL_DRAW_GAS + _GAS_PER_DELTA * rounds_summed
        return self.transact("sealRound", round, gas=gas)

    def beacon_block(self, round: int) -> int:
        """The block whose hash draws ``round``'s beacon, 0 until the first seal call."""
        return int(self._call("beaconBlock", round))

    def seal(self, round: int) -> SealInfo | None:
        """``round``'s seal, None while it is not sealed."""
        return SealInfo.from_abi(self._call("seal", round))

    def seat_rule(self) -> int:
        """The version of the seat rule the contract draws committees with
        (``node.chain.committee.SEAT_RULE`` is the one this software computes)."""
        return int(self._call("seatRule"))

    def committee_seat(self, round: int, subject: str, attester: str) -> tuple[bool, int]:
        """Whether ``attester`` sits on ``subject``'s committee of sealed ``round``, and its vote
        weight there."""
        seated, weight = self._call(
            "committeeSeat", round, to_checksum_address(subject), to_checksum_address(attester)
        )
        return bool(seated), int(weight)

    def post_evidence(
        self, round: int, subject: str, group: int, completion: int, token: int
    ) -> TxReceipt:
        """Posts where ``subject``'s batch of ``round`` fails this seat's provenance recompute
        (once per seat and batch, in the commit phase). Emits ``ProvenanceEvidence``."""
        return self.transact(
            "postEvidence", round, to_checksum_address(subject), group, completion, token
        )

    def recomputes(self, round: int, subject: str, attester: str) -> bool:
        """Whether ``attester`` is a seat that recomputes ``subject``'s batch of sealed ``round``
        (``node.provenance.choice.recomputes`` on its seats)."""
        return bool(
            self._call(
                "recomputes", round, to_checksum_address(subject), to_checksum_address(attester)
            )
        )

    def recomputing_seats(self) -> int:
        """m: the seats per batch, on average, that recompute its provenance."""
        return int(self._call("RECOMPUTING_SEATS"))

    def commit_verdicts(
        self, round: int, commitment: bytes, deposit: int | None = None
    ) -> TxReceipt:
        """Commits this account's verdicts on ``round`` (``committee.ballot_commitment``) with
        ``deposit`` wei (None: the contract's commit deposit), which the reveal sends back."""
        value = self.cached_commit_deposit if deposit is None else deposit
        return self.transact("commitVerdicts", round, commitment, value=value)

    def commit_deposit(self) -> int:
        """Wei every commitment carries until its reveal sends it back."""
        return int(self._call("commitDeposit"))

    def reveal_verdicts(
        self, round: int, items: Sequence[VerdictItem], salt: bytes, *, sort: bool = True
    ) -> TxReceipt:
        """Reveals the committed verdicts, sorted by subject unless ``sort=False`` (the order must
        be the committed one: commit sorted items)."""
        ordered = sort_items(items) if sort else list(items)
        return self.transact("revealVerdicts", round, [i.to_abi() for i in ordered], salt)

    def settle(self, round: int, subject: str) -> TxReceipt:
        """Settles a flagged (round, subject) after its reveal phase; pays this account a tip."""
        return self.transact("settle", round, to_checksum_address(subject))

    def resolve_flag(self, round: int, subject: str, flagger: str) -> TxReceipt:
        """Resolves ``flagger``'s flag on a settled (round, subject)."""
        return self.transact(
            "resolveFlag", round, to_checksum_address(subject), to_checksum_address(flagger)
        )

    def report_agreement(
        self, round: int, attester: str, items: Sequence[VerdictItem], index: int
    ) -> TxReceipt:
        """Penalizes ``attester``'s agreement ``items[index]`` with an upheld batch; ``items`` are
        its revealed items, in the revealed order."""
        encoded = [item.to_abi() for item in items]
        return self.transact(
            "reportAgreement", round, to_checksum_address(attester), encoded, index
        )

    def verdict(self, round: int, subject: str) -> Verdict:
        return Verdict.from_abi(self._call("verdict", round, to_checksum_address(subject)))

    def ballot(self, round: int, attester: str) -> bytes:
        """The commitment before the reveal, the reveal receipt after, 32 zero bytes if none."""
        return bytes(self._call("ballot", round, to_checksum_address(attester)))

    def flag_weight(self, round: int, subject: str, flagger: str) -> int:
        """Vote weight of ``flagger``'s unresolved flag on (round, subject), 0 if none."""
        return int(
            self._call(
                "flagWeight", round, to_checksum_address(subject), to_checksum_address(flagger)
            )
        )

    def reward_pool(self, round: int, subject: str) -> int:
        """Wei of (round, subject)'s slash shared among its winning flaggers."""
        return int(self._call("rewardPool", round, to_checksum_address(subject)))

    def burned(self) -> int:
        """Wei slashed or forfeited that nobody can ever take out."""
        return int(self._call("burned"))

    # ------------------------------------------------------------------ views of the configuration

    def rules_at(self, round: int) -> Rules:
        """The rules that judge ``round``."""
        return Rules.from_abi(self._call("rulesAt", round))

    def rules_count(self) -> int:
        return int(self._call("rulesCount"))

    def rules_by_index(self, index: int) -> Rules:
        return Rules.from_abi(self._call("rulesByIndex", index))

    def rules_history(self) -> list[Rules]:
        """Every rules entry, oldest first (the last may still be pending)."""
        return [self.rules_by_index(i) for i in range(self.rules_count())]

    def min_stake(self) -> int:
        """Wei needed to register and to keep publishing, in force now."""
        return int(self._call("minStake"))

    def paused(self) -> bool:
        return bool(self._call("paused"))

    def owner(self) -> str:
        return str(self._call("owner"))

    def pending_owner(self) -> str | None:
        """The address a transfer of ownership waits for, None if none."""
        pending = str(self._call("pendingOwner"))
        return None if pending == ZERO_ADDRESS else pending

    def domain_separator(self) -> bytes:
        return bytes(self._call("domainSeparator"))

    def publish_typehash(self) -> bytes:
        return bytes(self._call("PUBLISH_TYPEHASH"))

    # ---------------------------------------------------------------------- administration (owner)

    def schedule_parameters(self, min_stake: int, rules: Rules) -> TxReceipt:
        """Schedules ``rules`` and ``min_stake`` from ``current_round() + J + 1`` (replacing a
        change still pending); the round is in the receipt's ParametersScheduled event and in
        ``rules_by_index(rules_count() - 1).from_round``."""
        return self.transact("scheduleParameters", min_stake, rules.to_abi())

    def pause(self) -> TxReceipt:
        return self.transact("pause")

    def unpause(self) -> TxReceipt:
        return self.transact("unpause")

    def transfer_ownership(self, new_owner: str) -> TxReceipt:
        return self.transact("transferOwnership", to_checksum_address(new_owner))

    def accept_ownership(self) -> TxReceipt:
        return self.transact("acceptOwnership")

    # -------------------------------------------------------------------------- plumbing

    def transact(
        self, function: str, *args: Any, value: int = 0, gas: int | None = None
    ) -> TxReceipt:
        """Sends ``function`` (Solidity name) from this account; ``gas`` skips estimation."""
        data = self.contract.encode_abi(function, args=list(args))
        return self._sender().send(
            to=self.address, data=bytes.fromhex(data[2:]), value=value, gas=gas, what=function
        )

    def _call(self, function: str, *args: Any) -> Any:
        bound = getattr(self.contract.functions, function)(*args)
        return self._rpc(bound.call, f"reading {function}")

    def _rpc(self, fn: Callable[[], Any], what: str) -> Any:
        return call_with_retry(fn, what=what, endpoint=endpoint_of(self.w3), policy=self.retry)

    def _sender(self) -> TransactionSender:
        if self.sender is None:
            raise MissingAccount(
                "this client is read-only: give it an account (a key) to send transactions"
            )
        return self.sender
