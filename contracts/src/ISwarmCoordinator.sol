// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ISwarmCoordinator (protocol v2)
/// @notice Types, errors, events and external functions of the swarm coordinator
/// (docs/PROTOCOL.md, "Contract SwarmCoordinator").
/// @dev Events are the indexer's API: their signatures are frozen once released.
///
/// Life of round r (g, c, v: the immutable graceRounds, commitRounds, revealRounds; J = g + c + v):
///   rounds r .. r+g            peers publish their batch of r
///   rounds r+g+1 .. r+g+c      anyone seals r (fixes its committee beacon); committee members commit
///   rounds r+g+c+1 .. r+J      committee members reveal their verdicts
///   rounds r+J+1 ..            anyone settles a flagged (r, subject); flags are then resolved
interface ISwarmCoordinator {
    // ---------------------------------------------------------------- types

    /// @notice Life cycle of a peer: one address is one peer, for good.
    enum PeerStatus {
        None,
        Active,
        Exiting,
        Withdrawn
    }

    /// @notice State of one (round, subject) publication and its verdict.
    enum VerdictState {
        None, // nothing published
        Published, // published; open to its committee until the reveal phase ends
        Upheld, // settled: the flags won and the subject was slashed
        Rejected, // settled: agreements outweighed the flags (the subject keeps its stake and gets their bonds)
        Inconclusive // settled: neither side won (nobody slashed, bonds returned, no verified reward)
    }

    /// @notice A peer's record as `peerInfo` returns it.
    /// @param stake Wei held for the peer, including `pendingStake` (slashes and forfeits are taken from it).
    /// @param pendingStake Part of `stake` deposited recently that does not count as voting weight before
    /// round `pendingFrom` (so stake added after a committee is drawn cannot sit on it).
    /// @param pendingFrom First round in which `pendingStake` counts.
    /// @param lockedBonds Wei of `stake` locked by this peer's unresolved flags.
    /// @param exitRound Round of `requestExit` (0 while active).
    /// @param openDisputes This peer's published rounds that were flagged and are not settled.
    /// @param openFlags Flags this peer revealed that are not resolved.
    /// @param status Life cycle state.
    struct PeerInfo {
        uint96 stake;
        uint96 pendingStake;
        uint64 pendingFrom;
        uint96 lockedBonds;
        uint64 exitRound;
        uint32 openDisputes;
        uint32 openFlags;
        PeerStatus status;
    }

    /// @notice Round phases, fixed at deployment (immutable): graceRounds < graceRounds + commitRounds + revealRounds.
    /// @param graceRounds Rounds after round r during which a batch of r is still accepted.
    /// @param commitRounds Rounds during which r is sealed and verdicts on r are committed (>= 1).
    /// @param revealRounds Rounds during which committed verdicts on r are revealed (>= 1).
    struct Phases {
        uint16 graceRounds;
        uint16 commitRounds;
        uint16 revealRounds;
    }

    /// @notice The rules that govern the verdicts of a round. Each round's rules are fixed: a change
    /// (`scheduleParameters`) governs rounds from `currentRound() + J + 1` on, so a peer that objects can
    /// exit and withdraw before the new rules judge any of its batches.
    /// @param fromRound First round these rules govern (set by the contract).
    /// @param flagBond Wei locked per flag; forfeited to the subject when the flag loses. Also what an
    /// attester loses for agreeing with a batch whose flags were upheld.
    /// @param committeeSize Expected committee seats per batch (k), >= 1.
    /// @param quorumBps Flags win when their weight exceeds this share of the weight that voted (5,000..9,999, so
    /// unanimous flags can always win).
    /// @param floorBps ...and reaches this share of the judging weight other than the subject's (0..10,000); they
    /// must also weigh at least the subject's own weight.
    /// @param slashBps Share of the subject's stake slashed when the flags win (1..10,000).
    /// @param rewardBps Share of a slash paid to the winning flaggers, pro rata to their vote weight.
    /// @param tipBps Share of a slash paid to whoever settles it, and share of an agreement penalty paid to its
    /// reporter (rewardBps + tipBps <= 10,000). The rest of a slash or penalty is burned (kept by the contract
    /// for good).
    /// @param tasksPerRound n: the groups of every batch, one per task of the round (1..64).
    /// @param groupSize G: the completions of every group (2..32). A batch claims at most n * G * 1000 milli-units.
    struct Rules {
        uint64 fromRound;
        uint96 flagBond;
        uint16 committeeSize;
        uint16 quorumBps;
        uint16 floorBps;
        uint16 slashBps;
        uint16 rewardBps;
        uint16 tipBps;
        uint16 tasksPerRound;
        uint16 groupSize;
    }

    /// @notice Tally of one (round, subject).
    /// @param flagWeight Vote weight of the revealed flags.
    /// @param agreeWeight Vote weight of the revealed agreements.
    /// @param flaggers Number of revealed flags.
    /// @param agreers Number of revealed agreements.
    /// @param state Published, then Upheld or Rejected once settled (None: nothing published).
    struct Verdict {
        uint96 flagWeight;
        uint96 agreeWeight;
        uint24 flaggers;
        uint24 agreers;
        VerdictState state;
    }

    /// @notice A sealed round's committee draw.
    /// @param beacon Randomness fixed when the round was sealed, after its publications closed.
    /// @param totalWeight Judging weight of all peers for the round (T in the seat rule).
    struct Seal {
        bytes20 beacon;
        uint96 totalWeight;
    }

    /// @notice One committee member's verdict on one batch of the round being revealed.
    /// @param subject Publishing peer (items sorted by subject, strictly ascending).
    /// @param checked Completions the attester re-scored (> 0).
    /// @param agreed Completions whose claimed reward matched (<= checked); fewer than checked is a flag.
    /// @param verifiedRewardSum Sum of the attester's own scores, in milli-units.
    struct VerdictItem {
        address subject;
        uint32 checked;
        uint32 agreed;
        int64 verifiedRewardSum;
    }

    // ---------------------------------------------------------------- errors

    error SwarmCoordinatorNotOwner(address caller);
    error SwarmCoordinatorNotPendingOwner(address caller);
    error SwarmCoordinatorPaused();
    error SwarmCoordinatorNotPaused();
    error SwarmCoordinatorInsufficientStake(uint256 stake, uint256 minStake);
    error SwarmCoordinatorInvalidName(uint256 length);
    error SwarmCoordinatorAlreadyRegistered(address peer);
    error SwarmCoordinatorNotActive(address peer);
    error SwarmCoordinatorNotExiting(address peer);
    /// @notice The peer's last rounds may still be judged: withdraw succeeds from `withdrawableFromRound`.
    error SwarmCoordinatorStillBonded(uint64 withdrawableFromRound);
    /// @notice The peer has flagged rounds that are not settled (anyone may settle them once their reveal ends).
    error SwarmCoordinatorOpenDisputes(uint256 openDisputes);
    /// @notice The peer has revealed flags that are not resolved (anyone may resolve them once settled).
    error SwarmCoordinatorOpenFlags(uint256 openFlags);
    error SwarmCoordinatorWrongRound(uint64 round, uint64 currentRound);
    error SwarmCoordinatorZeroDigest();
    error SwarmCoordinatorAlreadyPublished(uint64 round, address peer);
    error SwarmCoordinatorInvalidSignature();
    /// @notice A relayed publication's signature has expired.
    error SwarmCoordinatorSignatureExpired(uint64 deadline);
    /// @notice The signature names another relayer.
    error SwarmCoordinatorWrongRelayer(address relayer);
    /// @notice The call is outside the phase of `round` in which it is allowed: it is allowed from round
    /// `fromRound` through round `toRound` (inclusive; type(uint64).max when there is no end).
    error SwarmCoordinatorWrongPhase(uint64 round, uint64 fromRound, uint64 toRound);
    error SwarmCoordinatorAlreadySealed(uint64 round);
    error SwarmCoordinatorNotSealed(uint64 round);
    error SwarmCoordinatorAlreadyCommitted(uint64 round, address attester);
    error SwarmCoordinatorZeroCommitment();
    /// @notice No commitment of the caller for the round, or the revealed items and salt do not match it
    /// (including a second reveal).
    error SwarmCoordinatorCommitmentMismatch(uint64 round, address attester);
    error SwarmCoordinatorSelfAttestation();
    error SwarmCoordinatorAttestationOutOfOrder(address subject);
    error SwarmCoordinatorNoPublication(uint64 round, address subject);
    error SwarmCoordinatorInvalidCounts(uint32 checked, uint32 agreed);
    error SwarmCoordinatorNoDispute(uint64 round, address subject);
    error SwarmCoordinatorAlreadySettled(uint64 round, address subject);
    error SwarmCoordinatorNotSettled(uint64 round, address subject);
    error SwarmCoordinatorNoFlag(uint64 round, address subject, address flagger);
    /// @notice The agreement cannot be penalized: no such revealed agreement, its verdict was not upheld, or it
    /// was penalized already.
    error SwarmCoordinatorNotPenalizable(uint64 round, address subject, address attester);
    error SwarmCoordinatorInvalidParameter(bytes32 name, uint256 value);
    error SwarmCoordinatorZeroAddress();
    error SwarmCoordinatorNothingToClaim();
    error SwarmCoordinatorTransferFailed(address to, uint256 amount);
    error SwarmCoordinatorEndpointTooLong(uint256 length, uint256 maxLength);
    /// @notice A commitment must carry exactly the commit deposit.
    error SwarmCoordinatorWrongDeposit(uint256 sent, uint256 required);
    /// @notice A revealed reward sum outside [0, n * G * 1000] of the judged round's rules.
    error SwarmCoordinatorRewardOutOfRange(int64 value, int256 maximum);
    /// @notice The round's beacon block is the current block: complete the seal from the next block on.
    error SwarmCoordinatorBeaconPending(uint64 round, uint256 beaconBlock);
    /// @notice The caller is not one of the seats that recompute `subject`'s batch of `round`.
    error SwarmCoordinatorNotRecomputing(uint64 round, address subject, address poster);
    /// @notice The caller already posted evidence on (round, subject).
    error SwarmCoordinatorAlreadyPosted(uint64 round, address subject, address poster);
    /// @notice The evidence names a group or completion that no batch of the round has.
    error SwarmCoordinatorInvalidEvidence(uint32 group, uint32 completion);

    // ---------------------------------------------------------------- events (docs/PROTOCOL.md, "Events"; frozen)

    event PeerRegistered(address indexed peer, string name, uint256 stake);
    /// @param countsFromRound First round in which the added stake counts as voting weight.
    event StakeAdded(address indexed peer, uint256 amount, uint256 totalStake, uint64 countsFromRound);
    /// @param withdrawableFromRound First round in which `withdraw` can succeed (exitRound + J + 1).
    event ExitRequested(address indexed peer, uint64 exitRound, uint64 withdrawableFromRound);
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
    event EndpointAnnounced(address indexed peer, bytes endpoint);
    /// @notice The first seal call of `round` fixed its beacon block: the beacon is drawn from that block's hash
    /// by the next seal call (in a later block).
    event RoundArmed(uint64 indexed round, uint256 beaconBlock);
    event RoundSealed(uint64 indexed round, bytes20 beacon, uint256 totalWeight);
    event VerdictsCommitted(uint64 indexed round, address indexed attester);
    /// @notice A seat that recomputes `subject`'s batch of `round` found completion `completion` of group `group`
    /// not sampled from the model the batch names, first at token index `token`: every other member re-checks that
    /// group before it commits (emitted by the EvidenceExtension, at the coordinator's address).
    event ProvenanceEvidence(
        uint64 indexed round,
        address indexed subject,
        address indexed poster,
        uint32 group,
        uint32 completion,
        uint32 token
    );
    /// @param weight The attester's vote weight on this batch.
    event VerdictRevealed(
        uint64 indexed round,
        address indexed subject,
        address indexed attester,
        uint32 checked,
        uint32 agreed,
        int64 verifiedRewardSum,
        uint256 weight
    );
    /// @notice A revealed item did not count: the attester no longer holds a seat on the subject's committee
    /// (its weight fell after the commitment, e.g. by a slash). The reveal's other items count. Carries the
    /// item so that a reveal's full item list can be rebuilt from its VerdictRevealed and VerdictIgnored events.
    event VerdictIgnored(
        uint64 indexed round,
        address indexed subject,
        address indexed attester,
        uint32 checked,
        uint32 agreed,
        int64 verifiedRewardSum
    );
    /// @param outcome Upheld (slashed), Rejected (agreements outweighed the flags) or Inconclusive.
    /// @param amount Wei slashed from the subject (0 unless upheld).
    /// @param tip Wei of the slash paid to `settler`.
    event DisputeSettled(
        uint64 indexed round,
        address indexed subject,
        VerdictState outcome,
        uint256 amount,
        uint256 flagWeight,
        uint256 agreeWeight,
        address settler,
        uint256 tip
    );
    /// @param upheld True: the flagger got its bond back and `amount` of the slash. False: it forfeited `amount`
    /// (its bond) to the subject (Rejected), or got its bond back with `amount` 0 (Inconclusive).
    event FlagResolved(
        uint64 indexed round, address indexed subject, address indexed flagger, bool upheld, uint256 amount
    );
    /// @param amount Wei taken from the attester; `reporterShare` of it went to `reporter`, the rest is burned.
    event AgreementPenalized(
        uint64 indexed round,
        address indexed subject,
        address indexed attester,
        address reporter,
        uint256 amount,
        uint256 reporterShare
    );
    event ParametersScheduled(uint64 indexed fromRound, uint256 minStake, Rules rules);
    event Claimed(address indexed account, uint256 amount);
    event Paused(address account);
    event Unpaused(address account);
    event OwnershipTransferStarted(address indexed previousOwner, address indexed newOwner);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    // ---------------------------------------------------------------- peers and stake

    /// @notice Registers the caller with the ether sent as stake (counted as voting weight from the next round).
    /// Not while paused; `msg.value >= minStake()`; name 1-32 bytes; caller never registered.
    function register(string calldata name) external payable;

    /// @notice Adds the ether sent to the caller's stake (voting weight from the next round). Not while paused.
    function addStake() external payable;

    /// @notice Stops the caller's participation from this round on. Works while paused.
    function requestExit() external;

    /// @notice Sends an exiting peer its stake once every round it published or judged can no longer be
    /// judged (round >= exitRound + J + 1) and it has no open dispute or flag. Works while paused.
    function withdraw() external;

    /// @notice Sends the caller its claimable wei (rewards, tips, forfeited bonds). Works while paused.
    function claim() external;

    /// @notice Announces where the caller's content store can be reached (an event only; empty clears).
    function announceEndpoint(bytes calldata endpoint) external;

    // ---------------------------------------------------------------- rollout commitments

    /// @notice Commits the caller's batch of `round` (current round or at most graceRounds behind). Not while
    /// paused; the caller is active with at least minStake; first publication of the caller for the round.
    function publishRollouts(uint64 round, bytes32 digest, uint32 groups, uint32 completions, int64 rewardSum)
        external;

    /// @notice Commits `peer`'s batch on its behalf with `peer`'s EIP-712 `Publish` signature, which binds the
    /// relayer (zero: anyone may relay) and a deadline (unix time, inclusive).
    function publishRolloutsFor(
        address peer,
        uint64 round,
        bytes32 digest,
        uint32 groups,
        uint32 completions,
        int64 rewardSum,
        address relayer,
        uint64 deadline,
        bytes calldata signature
    ) external;

    // ---------------------------------------------------------------- committees and verdicts

    /// @notice Fixes round `round`'s committee beacon and total judging weight. Anyone, once, during the
    /// round's commit phase. Works while paused.
    function sealRound(uint64 round) external;

    /// @notice Commits the caller's verdicts on `round`: `keccak256(abi.encode(attester, round,
    /// keccak256(abi.encode(items)), salt))`. Once per (round, attester), during the commit phase, by an
    /// active peer (or an exiting one, for rounds up to its exit round). Works while paused.
    function commitVerdicts(uint64 round, bytes32 commitment) external payable;

    /// @notice Reveals the committed verdicts; each item counts with the caller's vote weight when the caller
    /// sits on the subject's committee (VerdictIgnored otherwise). Reveal phase only. Works while paused.
    function revealVerdicts(uint64 round, VerdictItem[] calldata items, bytes32 salt) external;

    /// @notice Settles a flagged (round, subject) once the reveal phase is over. Anyone; pays the caller
    /// `tipBps` of the slash. Works while paused.
    function settle(uint64 round, address subject) external;

    /// @notice After settlement: returns a flagger's bond plus its share of the slash (upheld), or forfeits its
    /// bond to the subject (rejected). Anyone may call; the money goes to claimable balances. Works while paused.
    function resolveFlag(uint64 round, address subject, address flagger) external;

    /// @notice Penalizes `attester` for agreeing with a batch whose flags were upheld, proven by its revealed
    /// items (checked against its stored reveal receipt); `index` picks the agreement. The attester loses
    /// min(flagBond, stake); the caller gets `tipBps` of it. Once per (round, subject, attester).
    function reportAgreement(uint64 round, address attester, VerdictItem[] calldata revealed, uint256 index)
        external;

    // ---------------------------------------------------------------- views

    function genesis() external view returns (uint64);
    function roundDuration() external view returns (uint64);
    function genesisSeed() external view returns (bytes32);
    function graceRounds() external view returns (uint16);
    function commitRounds() external view returns (uint16);
    function revealRounds() external view returns (uint16);
    function commitDeposit() external view returns (uint256);
    function currentRound() external view returns (uint64);
    /// @notice `keccak256(abi.encode(genesisSeed, round))`: the seed of a round's tasks.
    function roundSeed(uint64 round) external view returns (bytes32);
    function peerInfo(address peer) external view returns (PeerInfo memory);
    /// @notice The stake of `peer` that counts as voting weight for `round` (0 when it may not judge it).
    function weightAt(address peer, uint64 round) external view returns (uint256);
    function verdict(uint64 round, address subject) external view returns (Verdict memory);
    function seal(uint64 round) external view returns (Seal memory);
    /// @notice The block whose hash draws `round`'s beacon (0 until the first seal call fixes it).
    function beaconBlock(uint64 round) external view returns (uint256);
    /// @notice Version of the committee seat rule (docs/PROTOCOL.md, "Seats"): 2, points on a ring.
    function seatRule() external pure returns (uint256);
    /// @notice Whether `attester` sits on `subject`'s committee of a sealed `round`, and its vote weight there.
    function committeeSeat(uint64 round, address subject, address attester)
        external
        view
        returns (bool seated, uint256 weight);
    /// @notice The commitment of (round, attester) before its reveal, its reveal receipt after, zero if none.
    function ballot(uint64 round, address attester) external view returns (bytes32);
    /// @notice Vote weight of `flagger`'s unresolved flag on (round, subject), zero if none.
    function flagWeight(uint64 round, address subject, address flagger) external view returns (uint256);
    /// @notice Wei of the slash of (round, subject) shared among its winning flaggers (0 unless upheld).
    function rewardPool(uint64 round, address subject) external view returns (uint256);
    function rulesAt(uint64 round) external view returns (Rules memory);
    function rulesCount() external view returns (uint256);
    function rulesByIndex(uint256 index) external view returns (Rules memory);
    /// @notice Wei needed to register and to keep publishing, in force now.
    function minStake() external view returns (uint256);
    function claimable(address account) external view returns (uint256);
    /// @notice Wei slashed or forfeited that nobody can ever take out.
    function burned() external view returns (uint256);
    function paused() external view returns (bool);
    function owner() external view returns (address);
    function pendingOwner() external view returns (address);
    /// @notice EIP-712 domain: name "SwarmCoordinator", version "2", chainId, this contract, salt genesisSeed.
    function domainSeparator() external view returns (bytes32);

    // ---------------------------------------------------------------- administration

    /// @notice Schedules new rules and minimum stake, in force from `currentRound() + J + 1`; replaces a change
    /// still pending. Returns that round.
    function scheduleParameters(uint256 newMinStake, Rules calldata rules) external returns (uint64 fromRound);
    /// @notice Pauses register, addStake and publishing only (nothing that moves or locks stake).
    function pause() external;
    function unpause() external;
    function transferOwnership(address newOwner) external;
    function acceptOwnership() external;
}
