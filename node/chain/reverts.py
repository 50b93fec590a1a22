"""One exception class per Solidity custom error of SwarmCoordinator (protocol v2).

Each class is named exactly like its Solidity error, carries the error's arguments as typed
snake_case attributes (``SwarmCoordinatorInsufficientStake(...).min_stake``) and explains itself in
words a volunteer can act on: amounts in ETH, times as dates (with the time left when the chain
time is known), rounds as numbers. Defining a class registers it with
:class:`~node.chain.errors.ContractRevert`; ``node.chain.revert_decoding`` turns revert bytes into
instances.
"""

from __future__ import annotations

from node.chain.errors import ContractRevert
from node.chain.units import format_eth, format_timestamp

_UINT64_MAX = 2**64 - 1


class SwarmCoordinatorNotOwner(ContractRevert):
    error_name = "SwarmCoordinatorNotOwner"
    fields = ("caller",)
    caller: str

    def describe(self) -> str:
        return (
            f"{self.caller} is not the coordinator's owner: only the owner may schedule rules, "
            "pause or transfer ownership; send this from the owner's key"
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
            "the coordinator is paused by its owner: registering, adding stake and publishing are "
            "stopped until it is unpaused (judging, settling, exiting, withdrawing and claiming "
            "still work)"
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
            "then withdraw once its last rounds can no longer be judged"
        )


class SwarmCoordinatorStillBonded(ContractRevert):
    error_name = "SwarmCoordinatorStillBonded"
    fields = ("withdrawable_from_round",)
    withdrawable_from_round: int

    def describe(self) -> str:
        return (
            "the stake is still bonded (the peer's last rounds may still be judged): withdraw "
            f"works from round {self.withdrawable_from_round}"
        )


class SwarmCoordinatorOpenDisputes(ContractRevert):
    error_name = "SwarmCoordinatorOpenDisputes"
    fields = ("open_disputes",)
    open_disputes: int

    def describe(self) -> str:
        return (
            f"{self.open_disputes} flagged round(s) of this peer are not settled yet: withdraw "
            "works once they are; anyone may settle a round once its reveal phase is over"
        )


class SwarmCoordinatorOpenFlags(ContractRevert):
    error_name = "SwarmCoordinatorOpenFlags"
    fields = ("open_flags",)
    open_flags: int

    def describe(self) -> str:
        return (
            f"{self.open_flags} flag(s) this peer revealed are not resolved yet: withdraw works "
            "once they are; anyone may resolve a flag once its round is settled"
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
                f"{self.current_round}): publish for the current round"
            )
        return (
            f"round {self.round} is too old to publish for: the chain is in round "
            f"{self.current_round} and the round's grace window has passed; publish for the "
            "current round"
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
            "these values (EIP-712 version 2: this chain id, coordinator address and genesis seed) "
            "with its own key"
        )


class SwarmCoordinatorSignatureExpired(ContractRevert):
    error_name = "SwarmCoordinatorSignatureExpired"
    fields = ("deadline",)
    deadline: int

    def describe(self) -> str:
        return (
            f"the Publish signature expired at {format_timestamp(self.deadline)}: the peer "
            "must sign again with a later deadline"
        )


class SwarmCoordinatorWrongRelayer(ContractRevert):
    error_name = "SwarmCoordinatorWrongRelayer"
    fields = ("relayer",)
    relayer: str

    def describe(self) -> str:
        return (
            f"the Publish signature names relayer {self.relayer}: only that address may send it "
            "(or the peer signs again with the zero relayer, which anyone may send)"
        )


class SwarmCoordinatorWrongPhase(ContractRevert):
    error_name = "SwarmCoordinatorWrongPhase"
    fields = ("round", "from_round", "to_round")
    round: int
    from_round: int
    to_round: int

    def describe(self) -> str:
        until = "on" if self.to_round == _UINT64_MAX else f"through round {self.to_round}"
        return (
            f"this is not the phase of round {self.round} in which this call is allowed: it "
            f"works from round {self.from_round} {until}"
        )


class SwarmCoordinatorAlreadySealed(ContractRevert):
    error_name = "SwarmCoordinatorAlreadySealed"
    fields = ("round",)
    round: int

    def describe(self) -> str:
        return f"round {self.round} is sealed already: its committees are drawn"


class SwarmCoordinatorBeaconPending(ContractRevert):
    error_name = "SwarmCoordinatorBeaconPending"
    fields = ("round", "beacon_block")
    round: int
    beacon_block: int

    def describe(self) -> str:
        return (
            f"round {self.round}'s beacon block is {self.beacon_block}, the current block: the "
            "seal can be completed from the next block on"
        )


class SwarmCoordinatorNotRecomputing(ContractRevert):
    error_name = "SwarmCoordinatorNotRecomputing"
    fields = ("round", "subject", "poster")
    round: int
    subject: str
    poster: str

    def describe(self) -> str:
        return (
            f"{self.poster} is not one of the seats that recompute {self.subject}'s batch of round "
            f"{self.round} (or the round is not sealed yet): only those may post provenance evidence"
        )


class SwarmCoordinatorAlreadyPosted(ContractRevert):
    error_name = "SwarmCoordinatorAlreadyPosted"
    fields = ("round", "subject", "poster")
    round: int
    subject: str
    poster: str

    def describe(self) -> str:
        return (
            f"{self.poster} already posted evidence on {self.subject}'s batch of round "
            f"{self.round}: one piece of evidence per seat and batch"
        )


class SwarmCoordinatorInvalidEvidence(ContractRevert):
    error_name = "SwarmCoordinatorInvalidEvidence"
    fields = ("group", "completion")
    group: int
    completion: int

    def describe(self) -> str:
        return (
            f"group {self.group}, completion {self.completion} is outside the round's batches "
            "(group < tasksPerRound, completion < groupSize)"
        )


class SwarmCoordinatorWrongDeposit(ContractRevert):
    error_name = "SwarmCoordinatorWrongDeposit"
    fields = ("sent", "required")
    sent: int
    required: int

    def describe(self) -> str:
        return (
            f"a commitment carries exactly the commit deposit, {format_eth(self.required)} (sent "
            f"{format_eth(self.sent)}); the reveal sends it back"
        )


class SwarmCoordinatorRewardOutOfRange(ContractRevert):
    error_name = "SwarmCoordinatorRewardOutOfRange"
    fields = ("value", "maximum")
    value: int
    maximum: int

    def describe(self) -> str:
        return (
            f"a revealed reward sum of {self.value} milli-units is outside 0..{self.maximum}, the "
            "most a batch of the round can earn (tasks per round x group size x 1000)"
        )


class SwarmCoordinatorNotSealed(ContractRevert):
    error_name = "SwarmCoordinatorNotSealed"
    fields = ("round",)
    round: int

    def describe(self) -> str:
        return (
            f"round {self.round} is not sealed, so it has no committees: anyone may seal it "
            "during its commit phase (seal_round)"
        )


class SwarmCoordinatorAlreadyCommitted(ContractRevert):
    error_name = "SwarmCoordinatorAlreadyCommitted"
    fields = ("round", "attester")
    round: int
    attester: str

    def describe(self) -> str:
        return (
            f"{self.attester} already committed its verdicts on round {self.round}: one "
            "commitment per round; reveal it with the same items and salt"
        )


class SwarmCoordinatorZeroCommitment(ContractRevert):
    error_name = "SwarmCoordinatorZeroCommitment"

    def describe(self) -> str:
        return "the verdict commitment is zero: commit the hash of the items and salt"


class SwarmCoordinatorCommitmentMismatch(ContractRevert):
    error_name = "SwarmCoordinatorCommitmentMismatch"
    fields = ("round", "attester")
    round: int
    attester: str

    def describe(self) -> str:
        return (
            f"the revealed verdicts of {self.attester} on round {self.round} do not match its "
            "commitment: there is none, it was revealed already, or the items (their order "
            "included) or salt differ from those committed"
        )


class SwarmCoordinatorSelfAttestation(ContractRevert):
    error_name = "SwarmCoordinatorSelfAttestation"

    def describe(self) -> str:
        return "a peer cannot judge its own batch: drop the items whose subject is your address"


class SwarmCoordinatorAttestationOutOfOrder(ContractRevert):
    error_name = "SwarmCoordinatorAttestationOutOfOrder"
    fields = ("subject",)
    subject: str

    def describe(self) -> str:
        return (
            f"the verdict on {self.subject} is out of order: items must be sorted by subject, "
            "strictly ascending (one item per subject)"
        )


class SwarmCoordinatorNoPublication(ContractRevert):
    error_name = "SwarmCoordinatorNoPublication"
    fields = ("round", "subject")
    round: int
    subject: str

    def describe(self) -> str:
        return (
            f"{self.subject} has no open publication for round {self.round} (nothing published, "
            "or settled already): there is nothing to judge"
        )


class SwarmCoordinatorInvalidCounts(ContractRevert):
    error_name = "SwarmCoordinatorInvalidCounts"
    fields = ("checked", "agreed")
    checked: int
    agreed: int

    def describe(self) -> str:
        return (
            f"invalid counts checked={self.checked}, agreed={self.agreed}: checked must be "
            "positive and at most the round's completions per batch (tasks per round x group "
            "size), and agreed at most checked"
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


class SwarmCoordinatorNotSettled(ContractRevert):
    error_name = "SwarmCoordinatorNotSettled"
    fields = ("round", "subject")
    round: int
    subject: str

    def describe(self) -> str:
        return (
            f"the dispute over {self.subject}'s batch of round {self.round} is not settled: "
            "settle it first (anyone may, once the round's reveal phase is over)"
        )


class SwarmCoordinatorNoFlag(ContractRevert):
    error_name = "SwarmCoordinatorNoFlag"
    fields = ("round", "subject", "flagger")
    round: int
    subject: str
    flagger: str

    def describe(self) -> str:
        return (
            f"{self.flagger} has no unresolved flag on {self.subject}'s batch of round "
            f"{self.round} (never flagged it, or the flag is resolved already)"
        )


class SwarmCoordinatorNotPenalizable(ContractRevert):
    error_name = "SwarmCoordinatorNotPenalizable"
    fields = ("round", "subject", "attester")
    round: int
    subject: str
    attester: str

    def describe(self) -> str:
        return (
            f"{self.attester}'s verdict on {self.subject}'s batch of round {self.round} cannot be "
            "penalized: the items are not its revealed ones, the chosen item is not an agreement "
            "on that batch, the verdict was not upheld, or it was penalized already"
        )


_PARAMETER_RULES = {
    "minStake": "more than 0 wei and less than 2^96",
    "flagBond": "more than 0 wei and less than 2^96",
    "committeeSize": "at least 1",
    "quorumBps": "basis points, 5000 to 9999 (unanimous flags must be able to win)",
    "floorBps": "basis points, at most 10000",
    "slashBps": "basis points, 1 to 10000 (a slash must take something)",
    "tasksPerRound": "groups per batch, 1 to 64",
    "groupSize": "completions per group, 2 to 32",
    "rewardBps": "basis points, with rewardBps + tipBps at most 10000",
    "tipBps": "basis points, with rewardBps + tipBps at most 10000",
    "roundDuration": "more than 0 seconds",
    "graceRounds": "a number of rounds below 2^16",
    "commitRounds": "at least 1",
    "revealRounds": "at least 1",
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
        return (
            "this account has nothing to claim (rewards, tips and forfeited bonds are credited "
            "when flags are resolved and disputes settled)"
        )


class SwarmCoordinatorTransferFailed(ContractRevert):
    error_name = "SwarmCoordinatorTransferFailed"
    fields = ("to", "amount")
    to: str
    amount: int

    def describe(self) -> str:
        return (
            f"sending {format_eth(self.amount)} to {self.to} failed: the recipient must accept "
            "plain ether transfers (a contract needs a receive function)"
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
