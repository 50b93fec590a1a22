// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator} from "./ISwarmCoordinator.sol";
import {EvidenceExtension} from "./EvidenceExtension.sol";

/// @title SwarmCoordinator (protocol v2)
/// @notice Coordination bus of the SAPO swarm testnet: staked peers, rounds derived from chain time, rollout
/// commitments, committees drawn from a drawn beacon, bonded commit-reveal verdicts and slashing under rules
/// fixed per round. Detail lives in events; storage holds only what a later call must check.
/// @dev Storage per round: one Verdict slot per publication (publish creates it, voters update it), one Seal
/// slot, one ballot slot per attester and one slot per flag. A peer's record is two slots: `_peers` (read by
/// publish) and `_funds` (pending stake, locked bonds, open flags).
contract SwarmCoordinator is ISwarmCoordinator {
    // ---------------------------------------------------------------- constants

    bytes32 private constant _DOMAIN_TYPEHASH = keccak256(
        "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract,bytes32 salt)"
    );
    bytes32 private constant _NAME_HASH = keccak256("SwarmCoordinator");
    bytes32 private constant _VERSION_HASH = keccak256("2");

    /// @notice EIP-712 type hash of a relayed publication.
    bytes32 public constant PUBLISH_TYPEHASH = keccak256(
        "Publish(address peer,uint64 round,bytes32 digest,uint32 groups,uint32 completions,int64 rewardSum,address relayer,uint64 deadline)"
    );
    /// @notice Most bytes a store endpoint announcement may hold (docs/PROTOCOL.md, "Store endpoints").
    uint256 public constant MAX_ENDPOINT_BYTES = 512;
    /// @notice Most rounds any one phase may last.
    uint16 public constant MAX_PHASE_ROUNDS = 64;
    uint256 private constant _BPS = 10_000;
    /// @dev The batch format's limits (docs/PROTOCOL.md, "Limits"): groups per batch, completions per group.
    uint256 private constant _MAX_TASKS_PER_ROUND = 64;
    uint256 private constant _MAX_GROUP_SIZE = 32;
    /// @dev Upper half of the secp256k1 order: signatures with a larger s are malleable copies.
    uint256 private constant _SECP256K1_HALF_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    // ---------------------------------------------------------------- storage types

    /// @dev The slot publish reads: everything it checks, and what commit and settle update.
    struct PeerRecord {
        uint96 stake;
        uint64 pendingFrom;
        uint64 exitRound;
        uint24 openDisputes;
        PeerStatus status;
    }

    /// @dev The slot reveal and resolveFlag update: what flags lock.
    struct PeerFunds {
        uint96 pendingStake;
        uint96 lockedBonds;
        uint32 openFlags;
    }

    /// @dev Pause flag and the minimum stake in force, with the scheduled one: publish reads this slot only.
    struct Control {
        uint96 minStake;
        uint96 nextMinStake;
        uint56 nextFrom;
        bool paused;
    }

    /// @dev Changes of the total judging weight that take effect in one round: stake deposited the round before
    /// (it counts from this round) and stake of peers that asked to exit the round before (it stops counting).
    struct RoundDelta {
        uint96 joined;
        uint96 left;
    }

    /// @dev One unresolved flag: its vote weight and the bond it locked.
    struct Flag {
        uint96 weight;
        uint96 bond;
    }

    /// @dev The winning flaggers' share of a slash, paid out as their flags are resolved.
    struct Pool {
        uint96 amount;
        uint96 left;
        uint24 unresolved;
    }

    /// @dev What reveal needs for every item, read once per call.
    struct Ballot {
        uint64 round;
        bytes20 beacon;
        uint256 totalWeight;
        uint256 committeeSize;
        uint256 maxChecked;
        int256 maxReward;
        uint256 weight;
        uint256 flagBond;
        uint256 free;
        uint256 locked;
        uint256 flags;
    }

    // ---------------------------------------------------------------- immutables

    /// @notice Unix time at which round 0 starts.
    uint64 public immutable genesis;
    /// @notice Seconds per round.
    uint64 public immutable roundDuration;
    /// @notice Seed fixed at deployment; unique per deployment (salt of the EIP-712 domain).
    bytes32 public immutable genesisSeed;
    /// @notice Rounds after round r during which a batch of r is still accepted.
    uint16 public immutable graceRounds;
    /// @notice Rounds of the seal-and-commit phase.
    uint16 public immutable commitRounds;
    /// @notice Rounds of the reveal phase.
    uint16 public immutable revealRounds;
    /// @notice Wei sent with every commitment and sent back by its reveal; kept for good without one.
    uint256 public immutable commitDeposit;
    uint64 private immutable _judgingRounds;
    /// @dev Rounds after its exit round before a peer may withdraw: J to judge them, J more to settle and report.
    uint64 private immutable _bondedRounds;
    uint256 private immutable _cachedChainId;
    /// @dev The EvidenceExtension, deployed by the constructor; the fallback delegatecalls it.
    address private immutable _extension;
    bytes32 private immutable _cachedDomainSeparator;

    // ---------------------------------------------------------------- state

    Control private _control;
    /// @dev Stake of the Active peers: the judging weight of every round after the last recorded delta.
    uint96 private _liveWeight;
    address private _owner;
    address private _pendingOwner;
    uint256 private _burned;
    Rules[] private _rules;
    mapping(address peer => PeerRecord) private _peers;
    mapping(address peer => PeerFunds) private _funds;
    mapping(address account => uint256) private _claimable;
    mapping(uint64 round => Seal) private _seals;
    mapping(uint64 round => uint256) private _beaconBlocks;
    mapping(uint64 round => RoundDelta) private _deltas;
    mapping(uint64 round => mapping(address subject => Verdict)) private _verdicts;
    mapping(uint64 round => mapping(address attester => bytes32)) private _ballots;
    mapping(uint64 round => mapping(address subject => mapping(address flagger => Flag))) private _flags;
    mapping(uint64 round => mapping(address subject => Pool)) private _pools;
    mapping(uint64 round => mapping(address subject => mapping(address attester => bool))) private _penalized;

    // ---------------------------------------------------------------- modifiers

    modifier onlyOwner() {
        if (msg.sender != _owner) revert SwarmCoordinatorNotOwner(msg.sender);
        _;
    }

    modifier whenNotPaused() {
        if (_control.paused) revert SwarmCoordinatorPaused();
        _;
    }

    // ---------------------------------------------------------------- construction

    /// @notice Deploys the coordinator; round 0 starts now and the caller becomes owner.
    /// @param roundDuration_ Seconds per round (> 0, fixed for good: rounds are derived from it).
    /// @param seedInput Deployer's contribution to the genesis seed.
    /// @param phases Grace, commit and reveal rounds (commit and reveal >= 1, each <= MAX_PHASE_ROUNDS).
    /// @param minStake_ Initial minimum stake (wei, 0 < minStake_ < 2^96).
    /// @param commitDeposit_ Wei every commitment carries until it is revealed (0 < commitDeposit_ < 2^96).
    /// @param rules Rules of every round until a change is scheduled (`fromRound` is ignored: 0).
    constructor(
        uint64 roundDuration_,
        bytes32 seedInput,
        Phases memory phases,
        uint256 minStake_,
        uint256 commitDeposit_,
        Rules memory rules
    ) {
        if (roundDuration_ == 0) revert SwarmCoordinatorInvalidParameter("roundDuration", 0);
        if (commitDeposit_ == 0 || commitDeposit_ > type(uint96).max) {
            revert SwarmCoordinatorInvalidParameter("commitDeposit", commitDeposit_);
        }
        commitDeposit = commitDeposit_;
        _extension = address(new EvidenceExtension());
        _checkPhase("commitRounds", phases.commitRounds, 1);
        _checkPhase("revealRounds", phases.revealRounds, 1);
        _checkPhase("graceRounds", phases.graceRounds, 0);
        uint64 judging = uint64(phases.graceRounds) + phases.commitRounds + phases.revealRounds;
        // Holds by construction (commit, reveal >= 1); kept as the rule the protocol relies on.
        if (phases.graceRounds >= judging) revert SwarmCoordinatorInvalidParameter("graceRounds", phases.graceRounds);
        genesis = uint64(block.timestamp);
        roundDuration = roundDuration_;
        graceRounds = phases.graceRounds;
        commitRounds = phases.commitRounds;
        revealRounds = phases.revealRounds;
        _judgingRounds = judging;
        _bondedRounds = 2 * judging + 1;
        // The parent block's hash tells apart two deployments at the same address and time on chains whose
        // histories differ (a restarted dev chain); identical histories need a fresh seedInput (swarm-deploy).
        bytes32 parent = block.number == 0 ? bytes32(0) : blockhash(block.number - 1);
        genesisSeed = keccak256(
            abi.encode(block.prevrandao, seedInput, block.chainid, address(this), block.timestamp, parent)
        );
        _cachedChainId = block.chainid;
        _cachedDomainSeparator = _buildDomainSeparator();
        _setOwner(msg.sender);
        _checkParameters(minStake_, rules);
        rules.fromRound = 0;
        _rules.push(rules);
        _control = Control({minStake: uint96(minStake_), nextMinStake: uint96(minStake_), nextFrom: 0, paused: false});
        emit ParametersScheduled(0, minStake_, rules);
    }

    // ---------------------------------------------------------------- peers and stake

    /// @notice Registers the caller with the ether sent as stake (counted as voting weight from the next round).
    /// @dev Requirements: not paused; `msg.value >= minStake()`; name 1-32 bytes; caller never registered.
    /// Emits {PeerRegistered}.
    /// @param name Display name shown on the leaderboard (kept in the event only).
    function register(string calldata name) external payable whenNotPaused {
        uint256 minimum = minStake();
        if (msg.value < minimum) revert SwarmCoordinatorInsufficientStake(msg.value, minimum);
        if (bytes(name).length == 0 || bytes(name).length > 32) revert SwarmCoordinatorInvalidName(bytes(name).length);
        PeerRecord storage peer = _peers[msg.sender];
        if (peer.status != PeerStatus.None) revert SwarmCoordinatorAlreadyRegistered(msg.sender);
        peer.status = PeerStatus.Active;
        _deposit(msg.sender, msg.value);
        emit PeerRegistered(msg.sender, name, msg.value);
    }

    /// @notice Adds the ether sent to the caller's stake (voting weight from the next round).
    /// @dev Requirements: not paused; caller is an active peer; `msg.value > 0`. Emits {StakeAdded}.
    function addStake() external payable whenNotPaused {
        _activePeer(msg.sender);
        if (msg.value == 0) revert SwarmCoordinatorInsufficientStake(0, 1);
        uint64 countsFrom = _deposit(msg.sender, msg.value);
        emit StakeAdded(msg.sender, msg.value, _peers[msg.sender].stake, countsFrom);
    }

    /// @notice Stops the caller's participation from this round on: it may still judge rounds up to this one.
    /// @dev Requirements: caller is an active peer. Works while paused. Emits {ExitRequested}.
    function requestExit() external {
        PeerRecord storage peer = _activePeer(msg.sender);
        uint64 exitRound = currentRound();
        peer.status = PeerStatus.Exiting;
        peer.exitRound = exitRound;
        // It still judges rounds up to exitRound: its weight leaves the total from the next round on.
        _liveWeight -= peer.stake;
        _deltas[exitRound + 1].left += peer.stake;
        emit ExitRequested(msg.sender, exitRound, exitRound + _bondedRounds);
    }

    /// @notice Sends an exiting peer its whole stake once none of its rounds can be judged, settled or reported.
    /// @dev Requirements: caller is exiting; `currentRound() >= exitRound + 2J + 1`; no open dispute; no open
    /// flag. Works while paused. Emits {Withdrawn}.
    function withdraw() external {
        PeerRecord storage peer = _peers[msg.sender];
        if (peer.status != PeerStatus.Exiting) revert SwarmCoordinatorNotExiting(msg.sender);
        uint64 withdrawableFrom = peer.exitRound + _bondedRounds;
        if (currentRound() < withdrawableFrom) revert SwarmCoordinatorStillBonded(withdrawableFrom);
        if (peer.openDisputes != 0) revert SwarmCoordinatorOpenDisputes(peer.openDisputes);
        PeerFunds storage funds = _funds[msg.sender];
        if (funds.openFlags != 0) revert SwarmCoordinatorOpenFlags(funds.openFlags);
        uint96 amount = peer.stake;
        peer.stake = 0;
        peer.status = PeerStatus.Withdrawn;
        delete _funds[msg.sender];
        emit Withdrawn(msg.sender, amount);
        _sendValue(msg.sender, amount);
    }

    /// @notice Sends the caller its claimable wei (rewards, tips, forfeited bonds). Works while paused.
    /// @dev Requirements: something to claim. Emits {Claimed}.
    function claim() external {
        uint256 amount = _claimable[msg.sender];
        if (amount == 0) revert SwarmCoordinatorNothingToClaim();
        _claimable[msg.sender] = 0;
        emit Claimed(msg.sender, amount);
        _sendValue(msg.sender, amount);
    }

    /// @notice Announces where the caller's content store can be reached (an event only; empty clears).
    /// @dev Requirements: caller is an active peer; at most `MAX_ENDPOINT_BYTES` bytes. Works while paused: it
    /// writes no storage and moves no ether. Emits {EndpointAnnounced}.
    /// @param endpoint Canonical JSON `{"addrs":[...],"peer_id":"..."}`, or empty.
    function announceEndpoint(bytes calldata endpoint) external {
        _activePeer(msg.sender);
        if (endpoint.length > MAX_ENDPOINT_BYTES) {
            revert SwarmCoordinatorEndpointTooLong(endpoint.length, MAX_ENDPOINT_BYTES);
        }
        emit EndpointAnnounced(msg.sender, endpoint);
    }

    // ---------------------------------------------------------------- rollout commitments

    /// @notice Commits the caller's batch of `round` by its SHA-256 digest.
    /// @dev Requirements: not paused; caller active with at least `minStake()`; `round` is the current round or
    /// at most `graceRounds` behind; digest non-zero; first publication of the caller for `round`.
    /// Emits {RolloutsPublished} with `relayer` zero.
    /// @param round Round of the batch.
    /// @param digest SHA-256 of the stored batch bytes.
    /// @param groups Task groups in the batch.
    /// @param completions Completions in the batch.
    /// @param rewardSum Sum of the claimed rewards, in milli-units.
    function publishRollouts(uint64 round, bytes32 digest, uint32 groups, uint32 completions, int64 rewardSum)
        external
    {
        _publish(msg.sender, round, digest);
        emit RolloutsPublished(round, msg.sender, digest, groups, completions, rewardSum, address(0));
    }

    /// @notice Commits `peer`'s batch on its behalf; the caller (a relayer) pays the gas.
    /// @dev Requirements: those of {publishRollouts} for `peer`; `block.timestamp <= deadline`; `relayer` is zero
    /// or the caller; `signature` is `peer`'s 65-byte EIP-712 `Publish` signature over all these values (its
    /// domain's salt is the genesis seed, so it is void on any other deployment). Emits {RolloutsPublished} with
    /// `relayer` = caller.
    /// @param peer The publishing peer.
    /// @param round Round of the batch.
    /// @param digest SHA-256 of the stored batch bytes.
    /// @param groups Task groups in the batch.
    /// @param completions Completions in the batch.
    /// @param rewardSum Sum of the claimed rewards, in milli-units.
    /// @param relayer The only address that may relay the signature (zero: anyone).
    /// @param deadline Last unix time at which the signature may be used.
    /// @param signature `peer`'s signature (r, s, v).
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
    ) external {
        if (block.timestamp > deadline) revert SwarmCoordinatorSignatureExpired(deadline);
        if (relayer != address(0) && relayer != msg.sender) revert SwarmCoordinatorWrongRelayer(relayer);
        bytes32 structHash = keccak256(
            abi.encode(PUBLISH_TYPEHASH, peer, round, digest, groups, completions, rewardSum, relayer, deadline)
        );
        bytes32 typedDataHash = keccak256(abi.encodePacked("\x19\x01", domainSeparator(), structHash));
        if (_recover(typedDataHash, signature) != peer) revert SwarmCoordinatorInvalidSignature();
        _publish(peer, round, digest);
        emit RolloutsPublished(round, peer, digest, groups, completions, rewardSum, msg.sender);
    }

    // ---------------------------------------------------------------- committees and verdicts

    /// @notice Draws round `round`'s committee in two calls: the first fixes the beacon block (the block it is
    /// mined in), a later one draws the beacon from that block's hash and fixes the total judging weight.
    /// @dev Anyone, during rounds `round + g + 1 .. round + g + c`. A caller cannot know the hash of the block its
    /// call is mined in, so no caller can choose the beacon, and every completing call draws the same one. When
    /// the beacon block is more than 256 blocks old its hash is gone: the call fixes the current block instead.
    /// Works while paused. Emits {RoundArmed} or {RoundSealed}.
    /// @param round The round to seal.
    function sealRound(uint64 round) external {
        _requirePhase(round, uint256(round) + graceRounds + 1, uint256(round) + graceRounds + commitRounds);
        Seal storage drawn = _seals[round];
        if (drawn.beacon != bytes20(0)) revert SwarmCoordinatorAlreadySealed(round);
        uint256 fixedBlock = _beaconBlocks[round];
        if (fixedBlock == block.number) revert SwarmCoordinatorBeaconPending(round, fixedBlock);
        bytes32 hash = fixedBlock == 0 ? bytes32(0) : blockhash(fixedBlock);
        if (hash == bytes32(0)) {
            _beaconBlocks[round] = block.number;
            emit RoundArmed(round, block.number);
            return;
        }
        bytes20 beacon = bytes20(keccak256(abi.encode(hash, _roundSeed(round))));
        // A zero beacon would read as "not drawn"; its probability is 2^-160, but the fallback costs nothing.
        if (beacon == bytes20(0)) beacon = bytes20(uint160(1));
        uint96 total = _totalWeightAt(round);
        drawn.beacon = beacon;
        drawn.totalWeight = total;
        emit RoundSealed(round, beacon, total);
    }

    /// @notice Commits the caller's verdicts on `round` (a hash of its items and a secret salt).
    /// @dev Requirements: rounds `round + g + 1 .. round + g + c`; `msg.value == commitDeposit`; commitment
    /// non-zero; caller active, or exiting with `round <= exitRound`; first commitment of the caller for `round`.
    /// The reveal sends the deposit back; a ballot never revealed leaves it in the contract for good, so
    /// watching the others' reveals before deciding whether to reveal has a price. Works while paused.
    /// Emits {VerdictsCommitted}.
    /// @param round The judged round.
    /// @param commitment `keccak256(abi.encode(attester, round, keccak256(abi.encode(items)), salt))`.
    function commitVerdicts(uint64 round, bytes32 commitment) external payable {
        if (msg.value != commitDeposit) revert SwarmCoordinatorWrongDeposit(msg.value, commitDeposit);
        _requirePhase(round, uint256(round) + graceRounds + 1, uint256(round) + graceRounds + commitRounds);
        if (commitment == bytes32(0)) revert SwarmCoordinatorZeroCommitment();
        PeerRecord storage peer = _peers[msg.sender];
        PeerStatus status = peer.status;
        bool mayJudge = status == PeerStatus.Active || (status == PeerStatus.Exiting && round <= peer.exitRound);
        if (!mayJudge) revert SwarmCoordinatorNotActive(msg.sender);
        mapping(address => bytes32) storage ballots = _ballots[round];
        if (ballots[msg.sender] != bytes32(0)) revert SwarmCoordinatorAlreadyCommitted(round, msg.sender);
        ballots[msg.sender] = commitment;
        emit VerdictsCommitted(round, msg.sender);
    }

    /// @notice Reveals the caller's committed verdicts on `round`; each item counts with the caller's vote weight
    /// where it sits on the subject's committee, and is ignored (VerdictIgnored) where it does not.
    /// @dev Requirements: rounds `round + g + c + 1 .. round + J`; round drawn; items and salt match the
    /// commitment; items sorted by subject strictly ascending; per item: not the caller, subject published
    /// `round` and is unsettled, `0 < checked <= n * G`, `agreed <= checked` (`InvalidCounts`),
    /// `0 <= verifiedRewardSum <= n * G * 1000` (`RewardOutOfRange`), n and G from `rulesAt(round)`. A flag
    /// counts only when the caller's free stake covers `flagBond`, which it locks until the flag is resolved
    /// (otherwise the item is ignored, like an item without a seat). The ballot then holds the reveal
    /// receipt, so a second reveal fails, and the commit deposit is sent back to the caller. Works while paused.
    /// Emits {VerdictRevealed} or {VerdictIgnored} per item.
    /// @param round The judged round.
    /// @param items The verdicts, exactly as committed.
    /// @param salt The commitment's salt.
    function revealVerdicts(uint64 round, VerdictItem[] calldata items, bytes32 salt) external {
        _requirePhase(round, uint256(round) + graceRounds + commitRounds + 1, uint256(round) + _judgingRounds);
        bytes32 itemsHash = keccak256(abi.encode(items));
        mapping(address => bytes32) storage ballots = _ballots[round];
        if (ballots[msg.sender] != keccak256(abi.encode(msg.sender, round, itemsHash, salt))) {
            revert SwarmCoordinatorCommitmentMismatch(round, msg.sender);
        }
        ballots[msg.sender] = _receipt(itemsHash);
        Ballot memory ctx = _openBallot(round);
        address previous = address(0);
        for (uint256 i = 0; i < items.length; ++i) {
            // One copy per item: re-reading each field from calldata costs more than the copy.
            VerdictItem memory item = items[i];
            if (i != 0 && item.subject <= previous) revert SwarmCoordinatorAttestationOutOfOrder(item.subject);
            previous = item.subject;
            _recordVerdict(ctx, item);
        }
        if (ctx.flags != 0) {
            PeerFunds storage funds = _funds[msg.sender];
            funds.lockedBonds = uint96(ctx.locked);
            funds.openFlags += uint32(ctx.flags);
        }
        // Last, after every state change: the commit deposit goes back to the revealer.
        _sendValue(msg.sender, commitDeposit);
    }

    /// @notice Settles a flagged (round, subject) once the reveal phase is over; pays the caller `tipBps` of a slash.
    /// @dev Anyone, from round `round + J + 1`; works while paused. Upheld when the flags' weight exceeds
    /// `quorumBps` of the weight that voted, reaches `floorBps` of the drawn total weight other than the
    /// subject's, and reaches the subject's own weight: the subject loses `slashBps` of its stake (tip to the
    /// caller, `rewardBps` to the flaggers' pool, the rest burned). Rejected when the agreements outweigh the
    /// flags: resolveFlag forfeits the bonds to the subject. Otherwise Inconclusive: resolveFlag returns them.
    /// Requirements: at least one flag; not settled. Emits {DisputeSettled}.
    /// @param round The round.
    /// @param subject The publishing peer.
    function settle(uint64 round, address subject) external {
        _requirePhase(round, uint256(round) + _judgingRounds + 1, type(uint64).max);
        Verdict storage tally = _verdicts[round][subject];
        if (tally.state > VerdictState.Published) revert SwarmCoordinatorAlreadySettled(round, subject);
        if (tally.flaggers == 0) revert SwarmCoordinatorNoDispute(round, subject);
        Rules memory rules = rulesAt(round);
        uint256 flags = tally.flagWeight;
        uint256 agreements = tally.agreeWeight;
        _peers[subject].openDisputes -= 1;
        uint256 amount = 0;
        uint256 tip = 0;
        VerdictState outcome;
        if (_upheld(round, subject, rules, flags, agreements)) {
            outcome = VerdictState.Upheld;
            (amount, tip) = _slash(round, subject, rules, tally.flaggers);
        } else {
            outcome = agreements > flags ? VerdictState.Rejected : VerdictState.Inconclusive;
        }
        tally.state = outcome;
        emit DisputeSettled(round, subject, outcome, amount, flags, agreements, msg.sender, tip);
    }

    /// @notice Resolves a settled flag: upheld, the flagger's bond unlocks and it earns its share of the slash;
    /// rejected, its bond (or what is left of it) goes to the subject; inconclusive, its bond unlocks.
    /// @dev Anyone; the money goes to claimable balances. Works while paused. Requirements: (round, subject)
    /// settled; the flag exists and is unresolved. Emits {FlagResolved}.
    /// @param round The round.
    /// @param subject The flagged peer.
    /// @param flagger The peer whose flag is resolved.
    function resolveFlag(uint64 round, address subject, address flagger) external {
        Verdict storage tally = _verdicts[round][subject];
        VerdictState state = tally.state;
        if (state == VerdictState.None || state == VerdictState.Published) {
            revert SwarmCoordinatorNotSettled(round, subject);
        }
        Flag memory flag = _flags[round][subject][flagger];
        if (flag.weight == 0) revert SwarmCoordinatorNoFlag(round, subject, flagger);
        delete _flags[round][subject][flagger];
        PeerFunds storage funds = _funds[flagger];
        funds.openFlags -= 1;
        funds.lockedBonds -= flag.bond;
        uint256 amount;
        if (state == VerdictState.Upheld) {
            amount = _payReward(round, subject, flag.weight, tally.flagWeight);
            _claimable[flagger] += amount;
        } else if (state == VerdictState.Rejected) {
            amount = _take(flagger, flag.bond);
            _claimable[subject] += amount;
        }
        emit FlagResolved(round, subject, flagger, state == VerdictState.Upheld, amount);
    }

    /// @notice Penalizes `attester` for agreeing with a batch whose flags were upheld.
    /// @dev Anyone but the attester. `revealed` must be the attester's revealed items of `round` (checked against
    /// its reveal receipt); `revealed[index]` agrees (agreed == checked) with a subject whose verdict was upheld.
    /// Once per (round, subject, attester), while the attester has not withdrawn. The attester loses
    /// `min(flagBond, stake)`; the caller gets `tipBps` of it, the rest is burned. Works while paused.
    /// Emits {AgreementPenalized}.
    /// @param round The judged round.
    /// @param attester The peer that agreed.
    /// @param revealed The attester's revealed items, exactly as revealed.
    /// @param index Position of the agreement in `revealed`.
    function reportAgreement(uint64 round, address attester, VerdictItem[] calldata revealed, uint256 index)
        external
    {
        address subject = index < revealed.length ? revealed[index].subject : address(0);
        bool provable = msg.sender != attester && index < revealed.length
            && _ballots[round][attester] == _receipt(keccak256(abi.encode(revealed)))
            && revealed[index].agreed == revealed[index].checked
            && _verdicts[round][subject].state == VerdictState.Upheld && !_penalized[round][subject][attester]
            && _peers[attester].status != PeerStatus.Withdrawn;
        if (!provable) revert SwarmCoordinatorNotPenalizable(round, subject, attester);
        _penalized[round][subject][attester] = true;
        Rules memory rules = rulesAt(round);
        uint256 amount = _take(attester, rules.flagBond);
        uint256 share = amount * rules.tipBps / _BPS;
        _claimable[msg.sender] += share;
        _burned += amount - share;
        emit AgreementPenalized(round, subject, attester, msg.sender, amount, share);
    }

    /// @notice Every other call goes to the ProvenanceEvidence extension (`postEvidence`, `recomputes`), run in
    /// this contract's context; a selector the extension lacks, or plain ether, reverts.
    fallback() external {
        address extension = _extension;
        assembly {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), extension, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            if iszero(ok) { revert(0, returndatasize()) }
            return(0, returndatasize())
        }
    }

    // ---------------------------------------------------------------- views

    /// @notice The round the chain is in now.
    function currentRound() public view returns (uint64) {
        return uint64((block.timestamp - genesis) / roundDuration);
    }

    /// @notice The seed of a round's tasks: `keccak256(abi.encode(genesisSeed, round))`.
    /// @param round The round.
    function roundSeed(uint64 round) external view returns (bytes32) {
        return _roundSeed(round);
    }

    /// @notice A peer's record (status None for an address that never registered).
    /// @param peer The address.
    function peerInfo(address peer) external view returns (PeerInfo memory info) {
        PeerRecord memory record = _peers[peer];
        PeerFunds memory funds = _funds[peer];
        info = PeerInfo({
            stake: record.stake,
            pendingStake: funds.pendingStake,
            pendingFrom: record.pendingFrom,
            lockedBonds: funds.lockedBonds,
            exitRound: record.exitRound,
            openDisputes: record.openDisputes,
            openFlags: funds.openFlags,
            status: record.status
        });
    }

    /// @notice The stake of `peer` that counts as voting weight for `round` (0 when it may not judge it).
    /// @param peer The address.
    /// @param round The round.
    function weightAt(address peer, uint64 round) public view returns (uint256) {
        PeerRecord memory record = _peers[peer];
        bool mayJudge = record.status == PeerStatus.Active
            || (record.status == PeerStatus.Exiting && round <= record.exitRound);
        if (!mayJudge) return 0;
        if (round >= record.pendingFrom) return record.stake;
        return record.stake - _funds[peer].pendingStake;
    }

    /// @notice The tally of (round, subject); state None when nothing was published.
    /// @param round The round.
    /// @param subject The publishing peer.
    function verdict(uint64 round, address subject) external view returns (Verdict memory) {
        return _verdicts[round][subject];
    }

    /// @notice A round's committee draw (zero until drawn).
    /// @param round The round.
    function seal(uint64 round) external view returns (Seal memory) {
        return _seals[round];
    }

    /// @notice The block whose hash draws `round`'s beacon (0 until the first seal call fixes it).
    /// @param round The round.
    function beaconBlock(uint64 round) external view returns (uint256) {
        return _beaconBlocks[round];
    }

    /// @notice Version of the committee seat rule (docs/PROTOCOL.md, "Seats"): 2, points on a ring.
    function seatRule() external pure returns (uint256) {
        return 2;
    }

    /// @notice Whether `attester` sits on `subject`'s committee of a drawn `round`, and its vote weight there.
    /// @param round The round.
    /// @param subject The publishing peer.
    /// @param attester The would-be committee member.
    function committeeSeat(uint64 round, address subject, address attester)
        external
        view
        returns (bool seated, uint256 weight)
    {
        Seal memory drawn = _seals[round];
        if (drawn.beacon == bytes20(0) || attester == subject) return (false, 0);
        weight = _voteWeight(
            drawn.beacon,
            drawn.totalWeight,
            rulesAt(round).committeeSize,
            subject,
            attester,
            weightAt(attester, round)
        );
        seated = weight != 0;
    }

    /// @notice The commitment of (round, attester) before its reveal, its reveal receipt after, zero if none.
    /// @param round The round.
    /// @param attester The attester.
    function ballot(uint64 round, address attester) external view returns (bytes32) {
        return _ballots[round][attester];
    }

    /// @notice Vote weight of `flagger`'s unresolved flag on (round, subject), zero if none.
    /// @param round The round.
    /// @param subject The flagged peer.
    /// @param flagger The flagger.
    function flagWeight(uint64 round, address subject, address flagger) external view returns (uint256) {
        return _flags[round][subject][flagger].weight;
    }

    /// @notice Wei of the slash of (round, subject) shared among its winning flaggers (0 unless upheld).
    /// @param round The round.
    /// @param subject The slashed peer.
    function rewardPool(uint64 round, address subject) external view returns (uint256) {
        return _pools[round][subject].amount;
    }

    /// @notice The rules that govern `round`: the last entry with `fromRound <= round`.
    /// @param round The round.
    function rulesAt(uint64 round) public view returns (Rules memory) {
        uint256 high = _rules.length - 1;
        if (_rules[high].fromRound <= round) return _rules[high];
        uint256 low = 0; // entry 0 starts at round 0, so it always qualifies
        while (low < high) {
            uint256 mid = (low + high + 1) / 2;
            if (_rules[mid].fromRound <= round) low = mid;
            else high = mid - 1;
        }
        return _rules[low];
    }

    /// @notice Number of entries in the rules history.
    function rulesCount() external view returns (uint256) {
        return _rules.length;
    }

    /// @notice One entry of the rules history (entry 0 is the constructor's, from round 0).
    /// @param index Position in the history.
    function rulesByIndex(uint256 index) external view returns (Rules memory) {
        return _rules[index];
    }

    /// @notice Wei needed to register and to keep publishing, in force now.
    function minStake() public view returns (uint256) {
        Control memory control = _control;
        return currentRound() >= control.nextFrom ? control.nextMinStake : control.minStake;
    }

    /// @notice Wei `account` may claim.
    /// @param account The address.
    function claimable(address account) external view returns (uint256) {
        return _claimable[account];
    }

    /// @notice Wei slashed or forfeited that nobody can ever take out.
    function burned() external view returns (uint256) {
        return _burned;
    }

    /// @notice Whether register, addStake and publishing are paused.
    function paused() external view returns (bool) {
        return _control.paused;
    }

    /// @notice The owner.
    function owner() external view returns (address) {
        return _owner;
    }

    /// @notice The address a started ownership transfer waits for, zero if none.
    function pendingOwner() external view returns (address) {
        return _pendingOwner;
    }

    /// @notice EIP-712 domain: name "SwarmCoordinator", version "2", chainId, this contract, salt genesisSeed.
    function domainSeparator() public view returns (bytes32) {
        return block.chainid == _cachedChainId ? _cachedDomainSeparator : _buildDomainSeparator();
    }

    // ---------------------------------------------------------------- administration

    /// @notice Schedules new rules and minimum stake, in force from `currentRound() + J + 1`; replaces a change
    /// still pending. Returns that round.
    /// @dev Owner only. Rounds that started before `fromRound` keep their rules for good. Emits {ParametersScheduled}.
    /// @param newMinStake Minimum stake (wei, 0 < newMinStake < 2^96).
    /// @param rules New rules (`fromRound` is ignored and set by the contract).
    function scheduleParameters(uint256 newMinStake, Rules calldata rules)
        external
        onlyOwner
        returns (uint64 fromRound)
    {
        _checkParameters(newMinStake, rules);
        uint64 current = currentRound();
        fromRound = current + _judgingRounds + 1;
        Rules memory entry = rules;
        entry.fromRound = fromRound;
        uint256 last = _rules.length - 1;
        if (_rules[last].fromRound > current) _rules[last] = entry;
        else _rules.push(entry);
        Control storage control = _control;
        if (current >= control.nextFrom) {
            // Batches of rounds before nextFrom are accepted until nextFrom + g, under the old minimum: until
            // then it cannot be replaced.
            if (control.minStake != control.nextMinStake && current < uint256(control.nextFrom) + graceRounds) {
                revert SwarmCoordinatorWrongPhase(current, control.nextFrom + graceRounds, type(uint64).max);
            }
            control.minStake = control.nextMinStake;
        }
        if (fromRound > type(uint56).max) revert SwarmCoordinatorInvalidParameter("fromRound", fromRound);
        control.nextMinStake = uint96(newMinStake);
        control.nextFrom = uint56(fromRound);
        emit ParametersScheduled(fromRound, newMinStake, entry);
    }

    /// @notice Pauses register, addStake and publishing only (nothing that moves or locks stake). Emits {Paused}.
    function pause() external onlyOwner {
        if (_control.paused) revert SwarmCoordinatorPaused();
        _control.paused = true;
        emit Paused(msg.sender);
    }

    /// @notice Lifts the pause. Emits {Unpaused}.
    function unpause() external onlyOwner {
        if (!_control.paused) revert SwarmCoordinatorNotPaused();
        _control.paused = false;
        emit Unpaused(msg.sender);
    }

    /// @notice Starts a two-step ownership transfer. Emits {OwnershipTransferStarted}.
    /// @param newOwner The address that must call acceptOwnership (zero cancels a started transfer).
    function transferOwnership(address newOwner) external onlyOwner {
        _pendingOwner = newOwner;
        emit OwnershipTransferStarted(_owner, newOwner);
    }

    /// @notice Completes a two-step ownership transfer. Emits {OwnershipTransferred}.
    function acceptOwnership() external {
        if (msg.sender != _pendingOwner) revert SwarmCoordinatorNotPendingOwner(msg.sender);
        delete _pendingOwner;
        _setOwner(msg.sender);
    }

    // ---------------------------------------------------------------- internal: publishing and stake

    /// @dev Reads three slots (control, peer record, verdict) and creates the verdict slot.
    function _publish(address peer, uint64 round, bytes32 digest) private {
        Control memory control = _control;
        if (control.paused) revert SwarmCoordinatorPaused();
        uint64 current = currentRound();
        // The minimum of the batch's own round (scheduleParameters keeps the previous one while it can apply).
        uint256 minimum = round >= control.nextFrom ? control.nextMinStake : control.minStake;
        PeerRecord storage record = _activePeer(peer);
        uint96 stake = record.stake;
        if (stake < minimum) revert SwarmCoordinatorInsufficientStake(stake, minimum);
        if (round > current || current - round > graceRounds) revert SwarmCoordinatorWrongRound(round, current);
        if (digest == bytes32(0)) revert SwarmCoordinatorZeroDigest();
        Verdict storage tally = _verdicts[round][peer];
        if (tally.state != VerdictState.None) revert SwarmCoordinatorAlreadyPublished(round, peer);
        tally.state = VerdictState.Published;
    }

    /// @dev Adds `amount` to the peer's stake as pending weight from the next round. An earlier pending part is
    /// merged into the counted stake only once no round it must not count for can still be judged
    /// (pendingFrom + J <= current); otherwise it stays pending with the new one, counting from the next round
    /// too, so stake added after a round's beacon is known never adds weight in that round. The round deltas
    /// follow the same rule, so the total of a round is the sum of its peers' weights.
    function _deposit(address account, uint256 value) private returns (uint64 countsFrom) {
        PeerRecord storage peer = _peers[account];
        PeerFunds storage funds = _funds[account];
        uint256 total = uint256(peer.stake) + value;
        if (total > type(uint96).max) revert SwarmCoordinatorInvalidParameter("stake", total);
        uint64 current = currentRound();
        countsFrom = current + 1;
        uint96 pending = funds.pendingStake;
        if (pending != 0 && uint256(peer.pendingFrom) + _judgingRounds <= current) pending = 0;
        if (pending != 0) _deltas[peer.pendingFrom].joined -= pending;
        _deltas[countsFrom].joined += pending + uint96(value);
        funds.pendingStake = pending + uint96(value);
        peer.stake = uint96(total);
        peer.pendingFrom = countsFrom;
        _liveWeight += uint96(value);
    }

    /// @dev Takes up to `amount` from a peer's stake (counted part first, then pending), and the same weight from
    /// the totals of every round it counts in (slashes and penalties lower the weight at once).
    function _take(address account, uint256 amount) private returns (uint256 taken) {
        PeerRecord storage peer = _peers[account];
        uint256 stake = peer.stake;
        taken = amount < stake ? amount : stake;
        uint96 left = uint96(stake - taken);
        peer.stake = left;
        PeerFunds storage funds = _funds[account];
        uint96 pending = funds.pendingStake;
        if (pending > left) {
            funds.pendingStake = left;
            _deltas[peer.pendingFrom].joined -= pending - left;
        }
        if (peer.status == PeerStatus.Active) _liveWeight -= uint96(taken);
        else if (peer.status == PeerStatus.Exiting) _deltas[peer.exitRound + 1].left -= uint96(taken);
    }

    /// @dev The weight that may judge `round`: the live weight without what joined after it, with what left after
    /// it. Called during `round`'s commit phase, so the loop spans at most g + c + 1 rounds.
    function _totalWeightAt(uint64 round) private view returns (uint96) {
        uint256 joined = 0;
        uint256 left = 0;
        uint64 last = currentRound() + 1;
        for (uint64 q = round + 1; q <= last; ++q) {
            RoundDelta memory delta = _deltas[q];
            joined += delta.joined;
            left += delta.left;
        }
        // Every peer's part of live + left - joined is its weight in `round`, never negative.
        return uint96(_liveWeight + left - joined);
    }

    function _activePeer(address account) private view returns (PeerRecord storage peer) {
        peer = _peers[account];
        if (peer.status != PeerStatus.Active) revert SwarmCoordinatorNotActive(account);
    }

    // ---------------------------------------------------------------- internal: verdicts

    function _openBallot(uint64 round) private view returns (Ballot memory ctx) {
        Seal memory drawn = _seals[round];
        if (drawn.beacon == bytes20(0)) revert SwarmCoordinatorNotSealed(round);
        Rules memory rules = rulesAt(round);
        PeerFunds memory funds = _funds[msg.sender];
        PeerRecord memory record = _peers[msg.sender];
        ctx.round = round;
        ctx.beacon = drawn.beacon;
        ctx.totalWeight = drawn.totalWeight;
        ctx.committeeSize = rules.committeeSize;
        ctx.maxChecked = uint256(rules.tasksPerRound) * rules.groupSize;
        ctx.maxReward = int256(ctx.maxChecked) * 1000;
        ctx.flagBond = rules.flagBond;
        ctx.locked = funds.lockedBonds;
        ctx.free = record.stake > funds.lockedBonds ? record.stake - funds.lockedBonds : 0;
        bool mayJudge = record.status == PeerStatus.Active
            || (record.status == PeerStatus.Exiting && round <= record.exitRound);
        if (mayJudge) ctx.weight = round >= record.pendingFrom ? record.stake : record.stake - funds.pendingStake;
    }

    function _recordVerdict(Ballot memory ctx, VerdictItem memory item) private {
        if (item.subject == msg.sender) revert SwarmCoordinatorSelfAttestation();
        if (item.checked == 0 || item.agreed > item.checked || item.checked > ctx.maxChecked) {
            revert SwarmCoordinatorInvalidCounts(item.checked, item.agreed);
        }
        if (item.verifiedRewardSum < 0 || item.verifiedRewardSum > ctx.maxReward) {
            revert SwarmCoordinatorRewardOutOfRange(item.verifiedRewardSum, ctx.maxReward);
        }
        Verdict storage tally = _verdicts[ctx.round][item.subject];
        Verdict memory current = tally;
        if (current.state != VerdictState.Published) revert SwarmCoordinatorNoPublication(ctx.round, item.subject);
        uint256 weight = _voteWeight(
            ctx.beacon, ctx.totalWeight, ctx.committeeSize, item.subject, msg.sender, ctx.weight
        );
        bool flag = item.agreed < item.checked;
        // A flag counts only with its whole bond: a flag that risks less than the rules say is not cast.
        if (weight == 0 || (flag && ctx.free < ctx.flagBond)) {
            emit VerdictIgnored(
                ctx.round, item.subject, msg.sender, item.checked, item.agreed, item.verifiedRewardSum
            );
            return;
        }
        if (flag) {
            if (current.flaggers == 0) _peers[item.subject].openDisputes += 1;
            current.flagWeight += uint96(weight);
            current.flaggers += 1;
            _lockBond(ctx, item.subject, weight);
        } else {
            current.agreeWeight += uint96(weight);
            current.agreers += 1;
        }
        _verdicts[ctx.round][item.subject] = current;
        emit VerdictRevealed(
            ctx.round, item.subject, msg.sender, item.checked, item.agreed, item.verifiedRewardSum, weight
        );
    }

    function _lockBond(Ballot memory ctx, address subject, uint256 weight) private {
        uint256 bond = ctx.flagBond;
        ctx.free -= bond;
        ctx.locked += bond;
        ctx.flags += 1;
        _flags[ctx.round][subject][msg.sender] = Flag({weight: uint96(weight), bond: uint96(bond)});
    }

    /// @dev The seat rule: fully seated with weight w when k * w >= T, else seated with probability k * w / T
    /// (drawn from the beacon) with weight T / k, so a seat's expected weight is w whatever the stake's split.
    /// The draw is the subject's point on a ring of 2^256 minus the attester's (each a hash of the beacon and
    /// one address, in opposite word orders): an attester's seats are the subjects whose points lie on an arc
    /// after its own, so anyone can list every seat of a round in O((N + S) log S), not N * S hashes.
    function _voteWeight(
        bytes20 beacon,
        uint256 totalWeight,
        uint256 committeeSize,
        address subject,
        address attester,
        uint256 weight
    ) private pure returns (uint256) {
        if (weight == 0 || totalWeight == 0 || attester == subject) return 0;
        uint256 scaled = committeeSize * weight;
        if (scaled >= totalWeight) return weight;
        // draw = (uint256(keccak256(abi.encode(beacon, subject))) - uint256(keccak256(abi.encode(attester, beacon))))
        // mod 2^256, in the scratch space (the two word orders keep the points apart)
        uint256 draw;
        assembly ("memory-safe") {
            mstore(0x00, beacon)
            mstore(0x20, and(subject, 0xffffffffffffffffffffffffffffffffffffffff))
            let point := keccak256(0x00, 0x40)
            mstore(0x00, and(attester, 0xffffffffffffffffffffffffffffffffffffffff))
            mstore(0x20, beacon)
            draw := sub(point, keccak256(0x00, 0x40))
        }
        return draw < (type(uint256).max / totalWeight) * scaled ? totalWeight / committeeSize : 0;
    }

    function _receipt(bytes32 itemsHash) private pure returns (bytes32) {
        return keccak256(abi.encode(itemsHash, "revealed"));
    }

    // ---------------------------------------------------------------- internal: settlement

    function _upheld(uint64 round, address subject, Rules memory rules, uint256 flags, uint256 agreements)
        private
        view
        returns (bool)
    {
        if (flags * _BPS <= uint256(rules.quorumBps) * (flags + agreements)) return false;
        uint256 total = _seals[round].totalWeight;
        uint256 subjectWeight = weightAt(subject, round);
        uint256 others = total > subjectWeight ? total - subjectWeight : 0;
        // The subject floor: no identity lighter than the subject can slash it, however few others there are.
        return flags * _BPS >= uint256(rules.floorBps) * others && flags >= subjectWeight;
    }

    function _slash(uint64 round, address subject, Rules memory rules, uint24 flaggers)
        private
        returns (uint256 amount, uint256 tip)
    {
        amount = _take(subject, uint256(_peers[subject].stake) * rules.slashBps / _BPS);
        tip = amount * rules.tipBps / _BPS;
        uint256 reward = amount * rules.rewardBps / _BPS;
        _claimable[msg.sender] += tip;
        _burned += amount - tip - reward;
        _pools[round][subject] = Pool({amount: uint96(reward), left: uint96(reward), unresolved: flaggers});
    }

    /// @dev A flagger's share: pool * its weight / all flags' weight (floor). The last flag resolved burns the
    /// rounding dust, so every wei of the pool ends up claimable or burned.
    function _payReward(uint64 round, address subject, uint256 weight, uint256 totalFlagWeight)
        private
        returns (uint256 share)
    {
        Pool memory pool = _pools[round][subject];
        share = uint256(pool.amount) * weight / totalFlagWeight;
        pool.left -= uint96(share);
        pool.unresolved -= 1;
        if (pool.unresolved == 0) {
            _burned += pool.left;
            pool.left = 0;
        }
        _pools[round][subject] = pool;
    }

    // ---------------------------------------------------------------- internal: parameters and helpers

    function _checkPhase(bytes32 name, uint16 value, uint16 minimum) private pure {
        if (value < minimum || value > MAX_PHASE_ROUNDS) revert SwarmCoordinatorInvalidParameter(name, value);
    }

    function _checkParameters(uint256 minStake_, Rules memory rules) private pure {
        if (minStake_ == 0 || minStake_ > type(uint96).max) revert SwarmCoordinatorInvalidParameter("minStake", minStake_);
        if (rules.flagBond == 0) revert SwarmCoordinatorInvalidParameter("flagBond", 0);
        if (rules.committeeSize == 0) revert SwarmCoordinatorInvalidParameter("committeeSize", 0);
        // Every range leaves slashing possible: unanimous flags beat a quorum below 100 %, and a slash takes something.
        if (rules.quorumBps < 5_000 || rules.quorumBps >= _BPS) {
            revert SwarmCoordinatorInvalidParameter("quorumBps", rules.quorumBps);
        }
        if (rules.floorBps > _BPS) revert SwarmCoordinatorInvalidParameter("floorBps", rules.floorBps);
        if (rules.slashBps == 0 || rules.slashBps > _BPS) {
            revert SwarmCoordinatorInvalidParameter("slashBps", rules.slashBps);
        }
        if (rules.tasksPerRound == 0 || rules.tasksPerRound > _MAX_TASKS_PER_ROUND) {
            revert SwarmCoordinatorInvalidParameter("tasksPerRound", rules.tasksPerRound);
        }
        if (rules.groupSize < 2 || rules.groupSize > _MAX_GROUP_SIZE) {
            revert SwarmCoordinatorInvalidParameter("groupSize", rules.groupSize);
        }
        if (uint256(rules.rewardBps) + rules.tipBps > _BPS) {
            revert SwarmCoordinatorInvalidParameter("rewardBps", uint256(rules.rewardBps) + rules.tipBps);
        }
    }

    /// @dev Reverts unless the current round is in [fromRound, toRound]; bounds above uint64 are clamped.
    function _requirePhase(uint64 round, uint256 fromRound, uint256 toRound) private view {
        uint64 current = currentRound();
        if (current < fromRound || current > toRound) {
            revert SwarmCoordinatorWrongPhase(round, _clamp(fromRound), _clamp(toRound));
        }
    }

    function _clamp(uint256 value) private pure returns (uint64) {
        return value > type(uint64).max ? type(uint64).max : uint64(value);
    }

    function _roundSeed(uint64 round) private view returns (bytes32) {
        return keccak256(abi.encode(genesisSeed, round));
    }

    function _setOwner(address newOwner) private {
        address previous = _owner;
        _owner = newOwner;
        emit OwnershipTransferred(previous, newOwner);
    }

    function _sendValue(address to, uint256 amount) private {
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert SwarmCoordinatorTransferFailed(to, amount);
    }

    function _buildDomainSeparator() private view returns (bytes32) {
        return keccak256(
            abi.encode(_DOMAIN_TYPEHASH, _NAME_HASH, _VERSION_HASH, block.chainid, address(this), genesisSeed)
        );
    }

    function _recover(bytes32 hash, bytes calldata signature) private pure returns (address signer) {
        if (signature.length != 65) revert SwarmCoordinatorInvalidSignature();
        bytes32 r;
        bytes32 s;
        uint8 v;
        // Reads r, s and v straight from calldata; the length check above keeps all reads in bounds.
        assembly ("memory-safe") {
            r := calldataload(signature.offset)
            s := calldataload(add(signature.offset, 32))
            v := byte(0, calldataload(add(signature.offset, 64)))
        }
        if (uint256(s) > _SECP256K1_HALF_ORDER || (v != 27 && v != 28)) revert SwarmCoordinatorInvalidSignature();
        signer = ecrecover(hash, v, r, s);
        if (signer == address(0)) revert SwarmCoordinatorInvalidSignature();
    }
}
