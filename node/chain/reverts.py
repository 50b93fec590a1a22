"""One exception class per Solidity custom error of SwarmCoordinator.

Each class is named exactly like its Solidity error, carries the error's arguments as typed
snake_case attributes (``SwarmCoordinatorInsufficientStake(...).min_stake``) and explains itself in
words a volunteer can act on: amounts in ETH, times as dates (with the time left when the chain
time is known), rounds as numbers. Defining a class registers it with
:class:`~node.chain.errors.ContractRevert`; ``node.chain.revert_decoding`` turns revert bytes into
instances.
"""

from __future__ import annotations

from node.chain.errors import ContractRevert
from node.chain.units import format_deadline, format_eth


class SwarmCoordinatorNotOwner(ContractRevert):
    error_name = "SwarmCoordinatorNotOwner"
    fields = ("caller",)
    caller: str

    def describe(self) -> str:
        return (
            f"{self.caller} is not the coordinator's owner: only the owner may change parameters, "
            "pause or transfer ownership; send this from the owner's key"
        )


class SwarmCoordinatorNotTreasury(ContractRevert):
    error_name = "SwarmCoordinatorNotTreasury"
    fields = ("caller",)
    caller: str

    def describe(self) -> str:
        return (
            f"{self.caller} is not the treasury: only the treasury address may claim slashed funds"
        )


class SwarmCoordinatorNotPendingOwner(ContractRevert):
    error_name = "SwarmCoordinatorNotPendingOwner"
    fields = ("caller",)
    caller: str

    def describe(self) -> str:
        return (
            f"{self.caller} is not the pending owner: the current owner must first call "
            f"transferOwnership({self.caller})"
        )


class SwarmCoordinatorPaused(ContractRevert):
    error_name = "SwarmCoordinatorPaused"

    def describe(self) -> str:
        return (
            "the coordinator is paused by its owner: registering, staking, publishing, attesting "
            "and "
            "settling are stopped until it is unpaused (request-exit and withdraw still work)"
        )


class SwarmCoordinatorNotPaused(ContractRevert):
    error_name = "SwarmCoordinatorNotPaused"

    def describe(self) -> str:
        return "the coordinator is not paused: there is nothing to unpause"


class SwarmCoordinatorInsufficientStake(ContractRevert):
    error_name = "SwarmCoordinatorInsufficientStake"
    fields = ("stake", "min_stake")
    stake: int
    min_stake: int

    def describe(self) -> str:
        if self.stake == 0 and self.min_stake == 1:
            return "no ether was sent: add stake with a positive amount"
        minimum = format_eth(self.min_stake)
        return (
            f"stake {format_eth(self.stake)} is below the minimum {minimum}: register with --stake "
            f"of at least {minimum}, or add stake to reach it"
        )


class SwarmCoordinatorInvalidName(ContractRevert):
    error_name = "SwarmCoordinatorInvalidName"
    fields = ("length",)
    length: int

    def describe(self) -> str:
        return (
            f"the peer name is {self.length} bytes long; it must be 1 to 32 bytes (UTF-8): "
            "choose a shorter, non-empty --name"
        )


class SwarmCoordinatorAlreadyRegistered(ContractRevert):
    error_name = "SwarmCoordinatorAlreadyRegistered"
    fields = ("peer",)
    peer: str

    def describe(self) -> str:
        return (
            f"{self.peer} is already registered (or was: an address registers only once); "
            "to join again, use a new key"
        )


class SwarmCoordinatorNotActive(ContractRevert):
    error_name = "SwarmCoordinatorNotActive"
    fields = ("peer",)
    peer: str

    def describe(self) -> str:
        return (
            f"{self.peer} is not an active peer (never registered, exiting or withdrawn): "
            "register first, with a key that has not exited"
        )


class SwarmCoordinatorNotExiting(ContractRevert):
    error_name = "SwarmCoordinatorNotExiting"
    fields = ("peer",)
    peer: str

    def describe(self) -> str:
        return (
            f"{self.peer} has not requested exit (or has withdrawn already): request exit first, "
            "then withdraw after the unbonding period"
        )


class SwarmCoordinatorStillUnbonding(ContractRevert):
    error_name = "SwarmCoordinatorStillUnbonding"
    fields = ("withdrawable_at",)
    withdrawable_at: int

    def describe(self) -> str:
        when = format_deadline(self.withdrawable_at, self.now)
        return f"the stake is still unbonding: withdraw works from {when}"


class SwarmCoordinatorOpenDisputes(ContractRevert):
    error_name = "SwarmCoordinatorOpenDisputes"
    fields = ("open_disputes",)
    open_disputes: int

    def describe(self) -> str:
        return (
            f"{self.open_disputes} flagged round(s) of this peer are not settled yet: withdraw "
            "works once "
            "they are; anyone may settle a round after its attestation window"
        )


class SwarmCoordinatorWrongRound(ContractRevert):
    error_name = "SwarmCoordinatorWrongRound"
    fields = ("round", "current_round")
    round: int
    current_round: int

    def describe(self) -> str:
        if self.round > self.current_round:
            return (
                f"round {self.round} has not started yet (the chain is in round "
                f"{self.current_round}): "
                "publish for the current round"
            )
        return (
            f"round {self.round} is too old to publish for: the chain is in round "
            f"{self.current_round} "
            "and the round's grace window has passed; publish for the current round"
        )


class SwarmCoordinatorZeroDigest(ContractRevert):
    error_name = "SwarmCoordinatorZeroDigest"

    def describe(self) -> str:
        return "the batch digest is zero: publish the SHA-256 of the stored batch bytes"


class SwarmCoordinatorAlreadyPublished(ContractRevert):
    error_name = "SwarmCoordinatorAlreadyPublished"
    fields = ("round", "peer")
    round: int
    peer: str

    def describe(self) -> str:
        return (
            f"{self.peer} already published a batch for round {self.round}: "
            "a peer publishes once per round"
        )


class SwarmCoordinatorInvalidSignature(ContractRevert):
    error_name = "SwarmCoordinatorInvalidSignature"

    def describe(self) -> str:
        return (
            "the Publish signature is malformed or not the peer's: the peer must sign exactly "
            "these "
            "values (EIP-712, this chain id and coordinator address) with its own key"
        )


class SwarmCoordinatorSelfAttestation(ContractRevert):
    error_name = "SwarmCoordinatorSelfAttestation"

    def describe(self) -> str:
        return (
            "a peer cannot attest its own batch: drop the items whose subject is your own address"
        )


class SwarmCoordinatorEmptyAttestation(ContractRevert):
    error_name = "SwarmCoordinatorEmptyAttestation"

    def describe(self) -> str:
        return "an attestation batch needs at least one item"


class SwarmCoordinatorAttestationOutOfOrder(ContractRevert):
    error_name = "SwarmCoordinatorAttestationOutOfOrder"
    fields = ("round", "subject")
    round: int
    subject: str

    def describe(self) -> str:
        return (
            f"the attestation of round {self.round}, subject {self.subject} is out of order: items "
            "must "
            "be sorted by (round, subject) strictly ascending and start at or after your next "
            "attestable "
            "round (peer info: next_attest_round); each (round, subject) is attested once"
        )


class SwarmCoordinatorAttestationWindowClosed(ContractRevert):
    error_name = "SwarmCoordinatorAttestationWindowClosed"
    fields = ("round", "current_round")
    round: int
    current_round: int

    def describe(self) -> str:
        return (
            f"the attestation window of round {self.round} has closed (the chain is in round "
            f"{self.current_round}): attest sooner after a round ends"
        )


class SwarmCoordinatorNoPublication(ContractRevert):
    error_name = "SwarmCoordinatorNoPublication"
    fields = ("round", "subject")
    round: int
    subject: str

    def describe(self) -> str:
        return (
            f"{self.subject} published nothing for round {self.round}: there is nothing to attest"
        )


class SwarmCoordinatorDigestMismatch(ContractRevert):
    error_name = "SwarmCoordinatorDigestMismatch"
    fields = ("published", "attested")
    published: bytes
    attested: bytes

    def describe(self) -> str:
        return (
            f"the attested digest 0x{self.attested.hex()} is not the published one "
            f"0x{self.published.hex()}: attest the batch the subject committed on-chain"
        )


class SwarmCoordinatorInvalidCounts(ContractRevert):
    error_name = "SwarmCoordinatorInvalidCounts"
    fields = ("checked", "agreed")
    checked: int
    agreed: int

    def describe(self) -> str:
        return (
            f"invalid counts checked={self.checked}, agreed={self.agreed}: checked must be "
            "positive "
            "and agreed at most checked"
        )


class SwarmCoordinatorAttestationWindowOpen(ContractRevert):
    error_name = "SwarmCoordinatorAttestationWindowOpen"
    fields = ("round", "settleable_from_round")
    round: int
    settleable_from_round: int

    def describe(self) -> str:
        return (
            f"round {self.round} is still open for attestations: settle works from round "
            f"{self.settleable_from_round}"
        )


class SwarmCoordinatorNoDispute(ContractRevert):
    error_name = "SwarmCoordinatorNoDispute"
    fields = ("round", "subject")
    round: int
    subject: str

    def describe(self) -> str:
        return (
            f"nobody flagged {self.subject}'s batch of round {self.round}: "
            "there is nothing to settle"
        )


class SwarmCoordinatorAlreadySettled(ContractRevert):
    error_name = "SwarmCoordinatorAlreadySettled"
    fields = ("round", "subject")
    round: int
    subject: str

    def describe(self) -> str:
        return f"the dispute over {self.subject}'s batch of round {self.round} is settled already"


_PARAMETER_RULES = {
    "minStake": "more than 0 wei",
    "unbondingPeriod": "seconds, at least (attestationWindowRounds + 1) rounds",
    "graceRounds": "at most attestationWindowRounds",
    "attestationWindowRounds": "at least 1 and graceRounds, with (window + 1) rounds "
    "within the unbonding period",
    "slashBps": "basis points, at most 10000",
    "disputeQuorum": "at least 1",
    "roundDuration": "more than 0 seconds",
    "stake": "a total stake that fits in 96 bits",
}


class SwarmCoordinatorInvalidParameter(ContractRevert):
    error_name = "SwarmCoordinatorInvalidParameter"
    fields = ("name", "value")
    name: bytes
    value: int

    @property
    def parameter_name(self) -> str:
        """The bytes32 name as text (``"minStake"``)."""
        return self.name.rstrip(b"\0").decode("utf-8", "replace")

    def describe(self) -> str:
        rule = _PARAMETER_RULES.get(self.parameter_name, "see the contract's documentation")
        return f"parameter {self.parameter_name} = {self.value} is out of range: it must be {rule}"


class SwarmCoordinatorZeroAddress(ContractRevert):
    error_name = "SwarmCoordinatorZeroAddress"

    def describe(self) -> str:
        return "the zero address is not allowed here: give a real address"


class SwarmCoordinatorNothingToClaim(ContractRevert):
    error_name = "SwarmCoordinatorNothingToClaim"

    def describe(self) -> str:
        return "there are no slashed funds to claim"


class SwarmCoordinatorTransferFailed(ContractRevert):
    error_name = "SwarmCoordinatorTransferFailed"
    fields = ("to", "amount")
    to: str
    amount: int

    def describe(self) -> str:
        return (
            f"sending {format_eth(self.amount)} to {self.to} failed: the recipient must accept "
            "plain "
            "ether transfers (a contract needs a receive function)"
        )


class SwarmCoordinatorEndpointTooLong(ContractRevert):
    error_name = "SwarmCoordinatorEndpointTooLong"
    fields = ("length", "max_length")
    length: int
    max_length: int

    def describe(self) -> str:
        return (
            f"the store endpoint is {self.length} bytes; the coordinator takes at most "
            f"{self.max_length}: announce fewer or shorter addresses"
        )
