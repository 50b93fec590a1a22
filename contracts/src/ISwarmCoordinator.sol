// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ISwarmCoordinator
/// @notice Types, errors and events of the swarm coordinator (docs/PROTOCOL.md, "Contract SwarmCoordinator").
/// @dev Events are the indexer's API: their signatures are frozen once released.
interface ISwarmCoordinator {
    // ---------------------------------------------------------------- types

    /// @notice Life cycle of a peer: one address is one peer, for good.
    enum PeerStatus {
        None,
        Active,
        Exiting,
        Withdrawn
    }

    /// @notice A peer's on-chain record (one storage slot).
    /// @param stake Wei currently staked (slashes are taken from it).
    /// @param withdrawableAt Unix time from which an exiting peer may withdraw; 0 while active.
    /// @param nextAttestRound Lowest round this peer may still attest for (attestations only move forward).
    /// @param openDisputes Rounds of this peer that were flagged and are not settled yet.
    /// @param status Life cycle state.
    struct PeerInfo {
        uint96 stake;
        uint64 withdrawableAt;
        uint64 nextAttestRound;
        uint24 openDisputes;
        PeerStatus status;
    }

    /// @notice One peer's verdict on another peer's rollout batch of one round.
    /// @param round Round of the publication.
    /// @param subject Publishing peer.
    /// @param digest SHA-256 of the batch bytes, must equal the subject's publication.
    /// @param checked Completions the attester re-scored (> 0).
    /// @param agreed Completions whose claimed reward matched (<= checked); fewer than checked is a flag.
    /// @param verifiedRewardSum Sum of the attester's own scores, in milli-units.
    struct Attestation {
        uint64 round;
        address subject;
        bytes32 digest;
        uint32 checked;
        uint32 agreed;
        int64 verifiedRewardSum;
    }

    /// @notice Attestation tally of one (round, subject).
    struct Verdict {
        uint32 flags;
        uint32 agreements;
        bool settled;
    }

    /// @notice Owner-settable parameters (one storage slot).
    /// @param minStake Wei needed to register and to keep publishing.
    /// @param unbondingPeriod Seconds between requestExit and withdraw; at least (attestationWindowRounds + 1) rounds.
    /// @param graceRounds Rounds after round r during which a batch for r is still accepted.
    /// @param attestationWindowRounds Rounds after round r during which r may be attested; settle comes after.
    /// @param slashBps Share of the stake slashed by a lost dispute, in basis points.
    /// @param disputeQuorum Flags needed (and more flags than agreements) to slash.
    /// @param paused Whether participation is paused (exits and withdrawals stay open).
    struct Parameters {
        uint96 minStake;
        uint32 unbondingPeriod;
        uint16 graceRounds;
        uint16 attestationWindowRounds;
        uint16 slashBps;
        uint16 disputeQuorum;
        bool paused;
    }

    // ---------------------------------------------------------------- errors

    /// @notice The caller is not the owner.
    /// @param caller The address that called.
    error SwarmCoordinatorNotOwner(address caller);
    /// @notice The caller is not the treasury.
    /// @param caller The address that called.
    error SwarmCoordinatorNotTreasury(address caller);
    /// @notice The caller is not the pending owner.
    /// @param caller The address that called.
    error SwarmCoordinatorNotPendingOwner(address caller);
    /// @notice The coordinator is paused.
    error SwarmCoordinatorPaused();
    /// @notice The coordinator is not paused.
    error SwarmCoordinatorNotPaused();
    /// @notice The stake is below the minimum.
    /// @param stake The stake offered or held, in wei.
    /// @param minStake The minimum stake, in wei.
    error SwarmCoordinatorInsufficientStake(uint256 stake, uint256 minStake);
    /// @notice The display name must be 1 to 32 bytes.
    /// @param length The length given, in bytes.
    error SwarmCoordinatorInvalidName(uint256 length);
    /// @notice The address is already a peer (or was one: addresses are not reused).
    /// @param peer The address.
    error SwarmCoordinatorAlreadyRegistered(address peer);
    /// @notice The address is not an active peer (never registered, exiting or withdrawn).
    /// @param peer The address.
    error SwarmCoordinatorNotActive(address peer);
    /// @notice The peer has not requested exit.
    /// @param peer The address.
    error SwarmCoordinatorNotExiting(address peer);
    /// @notice The unbonding period has not ended.
    /// @param withdrawableAt Unix time from which withdraw succeeds.
    error SwarmCoordinatorStillUnbonding(uint64 withdrawableAt);
    /// @notice The peer has flagged rounds that are not settled.
    /// @param openDisputes How many.
    error SwarmCoordinatorOpenDisputes(uint256 openDisputes);
    /// @notice The round is not the current round nor within the grace window.
    /// @param round The round given.
    /// @param currentRound The current round.
    error SwarmCoordinatorWrongRound(uint64 round, uint64 currentRound);
    /// @notice The digest is zero.
    error SwarmCoordinatorZeroDigest();
    /// @notice The peer already published for this round.
    /// @param round The round.
    /// @param peer The peer.
    error SwarmCoordinatorAlreadyPublished(uint64 round, address peer);
    /// @notice The EIP-712 signature is malformed or not the peer's.
    error SwarmCoordinatorInvalidSignature();
    /// @notice A peer cannot attest its own batch.
    error SwarmCoordinatorSelfAttestation();
    /// @notice An attestation batch must hold at least one item.
    error SwarmCoordinatorEmptyAttestation();
    /// @notice Items must be sorted by (round, subject), strictly ascending, from the attester's next round.
    /// @param round Round of the offending item.
    /// @param subject Subject of the offending item.
    error SwarmCoordinatorAttestationOutOfOrder(uint64 round, address subject);
    /// @notice The attestation window of the round has closed.
    /// @param round The round attested.
    /// @param currentRound The current round.
    error SwarmCoordinatorAttestationWindowClosed(uint64 round, uint64 currentRound);
    /// @notice The subject did not publish for the round.
    /// @param round The round.
    /// @param subject The subject.
    error SwarmCoordinatorNoPublication(uint64 round, address subject);
    /// @notice The attested digest is not the subject's publication.
    /// @param published The digest on record.
    /// @param attested The digest attested.
    error SwarmCoordinatorDigestMismatch(bytes32 published, bytes32 attested);
    /// @notice checked must be positive and agreed at most checked.
    /// @param checked Completions checked.
    /// @param agreed Completions agreed.
    error SwarmCoordinatorInvalidCounts(uint32 checked, uint32 agreed);
    /// @notice The attestation window of the round is still open.
    /// @param round The round.
    /// @param settleableFromRound First round in which settle succeeds.
    error SwarmCoordinatorAttestationWindowOpen(uint64 round, uint256 settleableFromRound);
    /// @notice Nobody flagged the subject's batch of this round: there is nothing to settle.
    /// @param round The round.
    /// @param subject The subject.
    error SwarmCoordinatorNoDispute(uint64 round, address subject);
    /// @notice The dispute was settled already.
    /// @param round The round.
    /// @param subject The subject.
    error SwarmCoordinatorAlreadySettled(uint64 round, address subject);
    /// @notice A parameter value is out of range.
    /// @param name The parameter.
    /// @param value The value rejected.
    error SwarmCoordinatorInvalidParameter(bytes32 name, uint256 value);
    /// @notice The zero address is not allowed here.
    error SwarmCoordinatorZeroAddress();
    /// @notice There are no slashed funds to claim.
    error SwarmCoordinatorNothingToClaim();
    /// @notice Sending ether failed.
    /// @param to The recipient.
    /// @param amount The amount, in wei.
    error SwarmCoordinatorTransferFailed(address to, uint256 amount);
    /// @notice A store endpoint is longer than the contract accepts.
    /// @param length The length given, in bytes.
    /// @param maxLength The most bytes an endpoint may have (MAX_ENDPOINT_BYTES).
    error SwarmCoordinatorEndpointTooLong(uint256 length, uint256 maxLength);

    // ---------------------------------------------------------------- events (docs/PROTOCOL.md, "Events"; frozen)

    event PeerRegistered(address indexed peer, string name, uint256 stake);
    event StakeAdded(address indexed peer, uint256 amount, uint256 totalStake);
    event ExitRequested(address indexed peer, uint64 withdrawableAt);
    event Withdrawn(address indexed peer, uint256 amount);
    event RolloutsPublished(
        uint64 indexed round,
        address indexed peer,
        bytes32 digest,
        uint32 groups,
        uint32 completions,
        int64 rewardSum,
        address relayer
    );
    event Attested(
        uint64 indexed round,
        address indexed subject,
        address indexed attester,
        bytes32 digest,
        uint32 checked,
        uint32 agreed,
        int64 verifiedRewardSum
    );
    event DisputeSettled(
        uint64 indexed round, address indexed subject, bool slashed, uint256 amount, uint32 flags, uint32 agreements
    );
    event ParametersChanged(bytes32 indexed name, uint256 value);

    // ---------------------------------------------------------------- events (store endpoints; frozen)

    /// @notice `peer` announced where its content store can be reached (docs/PROTOCOL.md, "Store endpoints").
    /// @param peer The announcing peer.
    /// @param endpoint Canonical JSON `{"addrs":[...],"peer_id":"..."}`, not parsed on-chain; empty clears.
    event EndpointAnnounced(address indexed peer, bytes endpoint);

    // ---------------------------------------------------------------- events (administration)

    event Paused(address account);
    event Unpaused(address account);
    event OwnershipTransferStarted(address indexed previousOwner, address indexed newOwner);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event TreasuryChanged(address indexed treasury);
    event SlashedFundsClaimed(address indexed treasury, uint256 amount);
}
