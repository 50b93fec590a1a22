// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator} from "./ISwarmCoordinator.sol";

/// @title SwarmCoordinator
/// @notice Coordination bus of the SAPO swarm testnet: staked peers, rounds derived from chain time,
/// rollout commitments, reward attestations and slashing. Detail lives in events; storage holds only
/// what a later call must check (docs/PROTOCOL.md fixes every external name and event).
/// @dev Storage per round is one slot per publication and one per attested (round, subject).
contract SwarmCoordinator is ISwarmCoordinator {
    // ---------------------------------------------------------------- constants

    bytes32 private constant _DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant _NAME_HASH = keccak256("SwarmCoordinator");
    bytes32 private constant _VERSION_HASH = keccak256("1");
    /// @notice EIP-712 type hash of a relayed publication.
    bytes32 public constant PUBLISH_TYPEHASH = keccak256(
        "Publish(address peer,uint64 round,bytes32 digest,uint32 groups,uint32 completions,int64 rewardSum)"
    );
    /// @notice Most bytes a store endpoint announcement may hold (docs/PROTOCOL.md, "Store endpoints").
    uint256 public constant MAX_ENDPOINT_BYTES = 512;
    uint256 private constant _BPS = 10_000;
    /// @dev Upper half of the secp256k1 order: signatures with a larger s are malleable copies.
    uint256 private constant _SECP256K1_HALF_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    // ---------------------------------------------------------------- immutables

    /// @notice Unix time at which round 0 starts.
    uint64 public immutable genesis;
    /// @notice Seconds per round.
    uint64 public immutable roundDuration;
    /// @notice Seed fixed at deployment from block.prevrandao and the deployer's input.
    bytes32 public immutable genesisSeed;
    uint256 private immutable _cachedChainId;
    bytes32 private immutable _cachedDomainSeparator;

    // ---------------------------------------------------------------- state

    Parameters private _params;
    address private _owner;
    address private _pendingOwner;
    address private _treasury;
    uint256 private _unclaimedSlashes;
    mapping(address peer => PeerInfo) private _peers;
    mapping(uint64 round => mapping(address peer => bytes32 digest)) private _publications;
    mapping(uint64 round => mapping(address subject => Verdict)) private _verdicts;

    // ---------------------------------------------------------------- modifiers

    modifier onlyOwner() {
        if (msg.sender != _owner) revert SwarmCoordinatorNotOwner(msg.sender);
        _;
    }

    modifier whenNotPaused() {
        if (_params.paused) revert SwarmCoordinatorPaused();
        _;
    }

    // ---------------------------------------------------------------- construction

    /// @notice Deploys the coordinator; round 0 starts now and the caller becomes owner and treasury.
    /// @param roundDuration_ Seconds per round (> 0, fixed for good: rounds are derived from it).
    /// @param seedInput Deployer's contribution to the genesis seed.
    /// @param params Initial parameters (`paused` is ignored; the coordinator starts unpaused).
    constructor(uint64 roundDuration_, bytes32 seedInput, Parameters memory params) {
        if (roundDuration_ == 0) revert SwarmCoordinatorInvalidParameter("roundDuration", 0);
        genesis = uint64(block.timestamp);
        roundDuration = roundDuration_;
        genesisSeed = keccak256(abi.encode(block.prevrandao, seedInput, block.chainid, address(this)));
        _cachedChainId = block.chainid;
        _cachedDomainSeparator = _buildDomainSeparator();
        _setOwner(msg.sender);
        _setTreasury(msg.sender);
        _setMinStake(params.minStake);
        _setSlashBps(params.slashBps);
        _setDisputeQuorum(params.disputeQuorum);
        _setAttestationWindowRounds(params.attestationWindowRounds, true);
        _setGraceRounds(params.graceRounds);
        _setUnbondingPeriod(params.unbondingPeriod);
    }

    // ---------------------------------------------------------------- peers and stake

    /// @notice Registers the caller as a peer with the ether sent as stake.
    /// @dev Requirements: not paused; `msg.value >= minStake`; name 1-32 bytes; caller never registered.
    /// Emits {PeerRegistered}.
    /// @param name Display name shown on the leaderboard (kept in the event only).
    function register(string calldata name) external payable whenNotPaused {
        uint256 minStake = _params.minStake;
        if (msg.value < minStake) revert SwarmCoordinatorInsufficientStake(msg.value, minStake);
        if (bytes(name).length == 0 || bytes(name).length > 32) revert SwarmCoordinatorInvalidName(bytes(name).length);
        PeerInfo storage peer = _peers[msg.sender];
        if (peer.status != PeerStatus.None) revert SwarmCoordinatorAlreadyRegistered(msg.sender);
        peer.stake = _toStake(msg.value);
        peer.status = PeerStatus.Active;
        emit PeerRegistered(msg.sender, name, msg.value);
    }

    /// @notice Adds the ether sent to the caller's stake.
    /// @dev Requirements: not paused; caller is an active peer; `msg.value > 0`. Emits {StakeAdded}.
    function addStake() external payable whenNotPaused {
        PeerInfo storage peer = _activePeer(msg.sender);
        if (msg.value == 0) revert SwarmCoordinatorInsufficientStake(0, 1);
        uint96 total = _toStake(peer.stake + msg.value);
        peer.stake = total;
        emit StakeAdded(msg.sender, msg.value, total);
    }

    /// @notice Stops the caller's participation; its stake becomes withdrawable after the unbonding period.
    /// @dev Requirements: caller is an active peer. Works while paused. Emits {ExitRequested}.
    function requestExit() external {
        PeerInfo storage peer = _activePeer(msg.sender);
        uint64 withdrawableAt = uint64(block.timestamp) + _params.unbondingPeriod;
        peer.status = PeerStatus.Exiting;
        peer.withdrawableAt = withdrawableAt;
        emit ExitRequested(msg.sender, withdrawableAt);
    }

    /// @notice Sends the caller's remaining stake back once unbonded.
    /// @dev Requirements: caller is exiting; unbonding ended; no open dispute. Works while paused.
    /// Emits {Withdrawn}.
    function withdraw() external {
        PeerInfo storage peer = _peers[msg.sender];
        if (peer.status != PeerStatus.Exiting) revert SwarmCoordinatorNotExiting(msg.sender);
        if (block.timestamp < peer.withdrawableAt) revert SwarmCoordinatorStillUnbonding(peer.withdrawableAt);
        if (peer.openDisputes != 0) revert SwarmCoordinatorOpenDisputes(peer.openDisputes);
        uint256 amount = peer.stake;
        peer.stake = 0;
        peer.status = PeerStatus.Withdrawn;
        emit Withdrawn(msg.sender, amount);
        _sendValue(msg.sender, amount);
    }

    /// @notice Announces where the caller's content store can be reached, so that peers fetching its
    /// batches connect to it (docs/PROTOCOL.md, "Store endpoints"). The latest announcement counts.
    /// @dev Requirements: caller is an active peer; at most `MAX_ENDPOINT_BYTES` bytes. Works while paused: it
    /// writes no storage and moves no ether. The bytes are not parsed here (nodes validate them); empty bytes
    /// withdraw the caller's endpoint. Emits {EndpointAnnounced}.
    /// @param endpoint Canonical JSON `{"addrs":[...],"peer_id":"..."}`, or empty.
    function announceEndpoint(bytes calldata endpoint) external {
        _activePeer(msg.sender);
        if (endpoint.length > MAX_ENDPOINT_BYTES) {
            revert SwarmCoordinatorEndpointTooLong(endpoint.length, MAX_ENDPOINT_BYTES);
        }
        emit EndpointAnnounced(msg.sender, endpoint);
    }

    // ---------------------------------------------------------------- rounds

    /// @notice The round the chain is in now.
    function currentRound() public view returns (uint64) {
        return uint64((block.timestamp - genesis) / roundDuration);
    }

    /// @notice The seed of a round: `keccak256(abi.encode(genesisSeed, round))`.
    /// @param round The round.
    function roundSeed(uint64 round) external view returns (bytes32) {
        return keccak256(abi.encode(genesisSeed, round));
    }

    // ---------------------------------------------------------------- rollout commitments

    /// @notice Commits the caller's rollout batch of `round` by its SHA-256 digest.
    /// @dev Requirements: not paused; caller is an active peer with at least `minStake`; `round` is the current
    /// round or at most `graceRounds` behind it; digest non-zero; first publication of the caller for `round`.
    /// Emits {RolloutsPublished} with `relayer` zero.
    /// @param round Round of the batch.
    /// @param digest SHA-256 of the stored batch bytes.
    /// @param groups Task groups in the batch.
    /// @param completions Completions in the batch.
    /// @param rewardSum Sum of the claimed rewards, in milli-units.
    function publishRollouts(uint64 round, bytes32 digest, uint32 groups, uint32 completions, int64 rewardSum)
        external
    {
        _publish(msg.sender, round, digest, groups, completions, rewardSum, address(0));
    }

    /// @notice Commits `peer`'s rollout batch on its behalf; the caller (a sponsor) pays the gas.
    /// @dev Requirements: those of {publishRollouts} for `peer`, and `signature` is `peer`'s 65-byte EIP-712
    /// signature of `Publish` over the same values. Replay is impossible: a (peer, round) publishes once.
    /// Emits {RolloutsPublished} with `relayer` = caller.
    /// @param peer The publishing peer.
    /// @param round Round of the batch.
    /// @param digest SHA-256 of the stored batch bytes.
    /// @param groups Task groups in the batch.
    /// @param completions Completions in the batch.
    /// @param rewardSum Sum of the claimed rewards, in milli-units.
    /// @param signature `peer`'s signature (r, s, v).
    function publishRolloutsFor(
        address peer,
        uint64 round,
        bytes32 digest,
        uint32 groups,
        uint32 completions,
        int64 rewardSum,
        bytes calldata signature
    ) external {
        bytes32 structHash =
            keccak256(abi.encode(PUBLISH_TYPEHASH, peer, round, digest, groups, completions, rewardSum));
        bytes32 typedDataHash = keccak256(abi.encodePacked("\x19\x01", domainSeparator(), structHash));
        if (_recover(typedDataHash, signature) != peer) revert SwarmCoordinatorInvalidSignature();
        _publish(peer, round, digest, groups, completions, rewardSum, msg.sender);
    }

    // ---------------------------------------------------------------- attestations

    /// @notice Records the caller's verdicts on other peers' batches.
    /// @dev Requirements: not paused; caller is an active peer; items non-empty and sorted by (round, subject)
    /// strictly ascending, the first at or after the caller's `nextAttestRound` (so each (round, subject) is
    /// attested at most once per attester); per item: subject is not the caller, the round's attestation
    /// window is open, `0 < checked`, `agreed <= checked`, digest equals the subject's publication.
    /// Emits {Attested} per item.
    /// @param items The verdicts.
    function attest(Attestation[] calldata items) external whenNotPaused {
        uint256 count = items.length;
        if (count == 0) revert SwarmCoordinatorEmptyAttestation();
        PeerInfo storage attester = _activePeer(msg.sender);
        uint64 current = currentRound();
        uint64 window = _params.attestationWindowRounds;
        uint64 previousRound = attester.nextAttestRound;
        address previousSubject = address(0);
        for (uint256 i = 0; i < count; ++i) {
            // One validated copy per item: re-reading each field from calldata costs ~2,500 gas more per item.
            Attestation memory item = items[i];
            _checkAttestationOrder(item, previousRound, previousSubject, i == 0);
            _recordAttestation(item, current, window);
            previousRound = item.round;
            previousSubject = item.subject;
        }
        attester.nextAttestRound = previousRound + 1;
    }

    // ---------------------------------------------------------------- disputes

    /// @notice Settles a flagged (round, subject) once its attestation window has closed.
    /// @dev Anyone may call. The subject is slashed `slashBps` of its stake when flags reach `disputeQuorum`
    /// and outnumber agreements; slashed ether goes to the treasury's claimable balance.
    /// Requirements: not paused; window closed; at least one flag; not settled before. Emits {DisputeSettled}.
    /// @param round The round.
    /// @param subject The publishing peer.
    function settle(uint64 round, address subject) external whenNotPaused {
        // uint256: a huge `round` must end in the error below, not in an overflow panic.
        uint256 settleableFrom = uint256(round) + _params.attestationWindowRounds + 1;
        if (currentRound() < settleableFrom) {
            revert SwarmCoordinatorAttestationWindowOpen(round, settleableFrom);
        }
        Verdict storage tally = _verdicts[round][subject];
        if (tally.settled) revert SwarmCoordinatorAlreadySettled(round, subject);
        uint32 flags = tally.flags;
        uint32 agreements = tally.agreements;
        if (flags == 0) revert SwarmCoordinatorNoDispute(round, subject);
        tally.settled = true;
        PeerInfo storage peer = _peers[subject];
        peer.openDisputes -= 1;
        bool slashed = flags >= _params.disputeQuorum && flags > agreements;
        uint256 amount = 0;
        if (slashed) {
            amount = uint256(peer.stake) * _params.slashBps / _BPS;
            peer.stake -= uint96(amount);
            _unclaimedSlashes += amount;
        }
        emit DisputeSettled(round, subject, slashed, amount, flags, agreements);
    }

    /// @notice Sends all slashed ether to the treasury.
    /// @dev Requirements: caller is the treasury; something to claim. Emits {SlashedFundsClaimed}.
    function claimSlashedFunds() external {
        address treasury_ = _treasury;
        if (msg.sender != treasury_) revert SwarmCoordinatorNotTreasury(msg.sender);
        uint256 amount = _unclaimedSlashes;
        if (amount == 0) revert SwarmCoordinatorNothingToClaim();
        _unclaimedSlashes = 0;
        emit SlashedFundsClaimed(treasury_, amount);
        _sendValue(treasury_, amount);
    }

    // ---------------------------------------------------------------- views

    /// @notice A peer's record (status None for an address that never registered).
    /// @param peer The address.
    function peerInfo(address peer) external view returns (PeerInfo memory) {
        return _peers[peer];
    }

    /// @notice The digest `peer` published for `round`, zero if none.
    /// @param round The round.
    /// @param peer The peer.
    function publication(uint64 round, address peer) external view returns (bytes32 digest) {
        return _publications[round][peer];
    }

    /// @notice The attestation tally of (round, subject).
    /// @param round The round.
    /// @param subject The publishing peer.
    function verdict(uint64 round, address subject) external view returns (Verdict memory) {
        return _verdicts[round][subject];
    }

    /// @notice All owner-settable parameters.
    function parameters() external view returns (Parameters memory) {
        return _params;
    }

    /// @notice Whether participation is paused.
    function paused() external view returns (bool) {
        return _params.paused;
    }

    /// @notice The owner.
    function owner() external view returns (address) {
        return _owner;
    }

    /// @notice The address a started ownership transfer waits for (see acceptOwnership), zero if none.
    function pendingOwner() external view returns (address) {
        return _pendingOwner;
    }

    /// @notice The address slashed stake is paid to.
    function treasury() external view returns (address) {
        return _treasury;
    }

    /// @notice Slashed wei not yet claimed by the treasury.
    function unclaimedSlashes() external view returns (uint256) {
        return _unclaimedSlashes;
    }

    /// @notice The EIP-712 domain separator (name "SwarmCoordinator", version "1").
    function domainSeparator() public view returns (bytes32) {
        return block.chainid == _cachedChainId ? _cachedDomainSeparator : _buildDomainSeparator();
    }

    // ---------------------------------------------------------------- administration

    /// @notice Sets the minimum stake (wei, > 0). Emits {ParametersChanged}.
    function setMinStake(uint256 value) external onlyOwner {
        _setMinStake(value);
    }

    /// @notice Sets the unbonding period (seconds, at least attestationWindowRounds + 1 rounds).
    function setUnbondingPeriod(uint256 value) external onlyOwner {
        _setUnbondingPeriod(value);
    }

    /// @notice Sets the grace window for late publications (rounds, at most attestationWindowRounds).
    function setGraceRounds(uint256 value) external onlyOwner {
        _setGraceRounds(value);
    }

    /// @notice Sets the attestation window (rounds, >= 1, >= graceRounds, fitting the unbonding period).
    function setAttestationWindowRounds(uint256 value) external onlyOwner {
        _setAttestationWindowRounds(value, false);
    }

    /// @notice Sets the share of stake slashed by a lost dispute (basis points, at most 10,000).
    function setSlashBps(uint256 value) external onlyOwner {
        _setSlashBps(value);
    }

    /// @notice Sets the number of flags needed to slash (>= 1).
    function setDisputeQuorum(uint256 value) external onlyOwner {
        _setDisputeQuorum(value);
    }

    /// @notice Sets the address slashed stake is paid to. Emits {TreasuryChanged}.
    function setTreasury(address treasury_) external onlyOwner {
        _setTreasury(treasury_);
    }

    /// @notice Pauses registration, staking, publishing, attesting and settling. Emits {Paused}.
    function pause() external onlyOwner {
        if (_params.paused) revert SwarmCoordinatorPaused();
        _params.paused = true;
        emit Paused(msg.sender);
    }

    /// @notice Lifts the pause. Emits {Unpaused}.
    function unpause() external onlyOwner {
        if (!_params.paused) revert SwarmCoordinatorNotPaused();
        _params.paused = false;
        emit Unpaused(msg.sender);
    }

    /// @notice Starts a two-step ownership transfer. Emits {OwnershipTransferStarted}.
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

    // ---------------------------------------------------------------- internal: protocol

    function _publish(
        address peer,
        uint64 round,
        bytes32 digest,
        uint32 groups,
        uint32 completions,
        int64 rewardSum,
        address relayer
    ) private {
        Parameters memory params = _params;
        if (params.paused) revert SwarmCoordinatorPaused();
        PeerInfo storage record = _activePeer(peer);
        if (record.stake < params.minStake) revert SwarmCoordinatorInsufficientStake(record.stake, params.minStake);
        uint64 current = currentRound();
        if (round > current || current - round > params.graceRounds) revert SwarmCoordinatorWrongRound(round, current);
        if (digest == bytes32(0)) revert SwarmCoordinatorZeroDigest();
        mapping(address => bytes32) storage roundPublications = _publications[round];
        if (roundPublications[peer] != bytes32(0)) revert SwarmCoordinatorAlreadyPublished(round, peer);
        roundPublications[peer] = digest;
        emit RolloutsPublished(round, peer, digest, groups, completions, rewardSum, relayer);
    }

    function _checkAttestationOrder(
        Attestation memory item,
        uint64 previousRound,
        address previousSubject,
        bool isFirst
    ) private pure {
        bool ordered = isFirst
            ? item.round >= previousRound
            : item.round > previousRound || (item.round == previousRound && item.subject > previousSubject);
        if (!ordered) revert SwarmCoordinatorAttestationOutOfOrder(item.round, item.subject);
    }

    function _recordAttestation(Attestation memory item, uint64 current, uint64 window) private {
        if (item.subject == msg.sender) revert SwarmCoordinatorSelfAttestation();
        if (current > uint256(item.round) + window) revert SwarmCoordinatorAttestationWindowClosed(item.round, current);
        if (item.checked == 0 || item.agreed > item.checked) {
            revert SwarmCoordinatorInvalidCounts(item.checked, item.agreed);
        }
        bytes32 published = _publications[item.round][item.subject];
        if (published == bytes32(0)) revert SwarmCoordinatorNoPublication(item.round, item.subject);
        if (published != item.digest) revert SwarmCoordinatorDigestMismatch(published, item.digest);
        Verdict storage tally = _verdicts[item.round][item.subject];
        if (item.agreed < item.checked) {
            if (tally.flags == 0) _peers[item.subject].openDisputes += 1;
            tally.flags += 1;
        } else {
            tally.agreements += 1;
        }
        emit Attested(
            item.round, item.subject, msg.sender, item.digest, item.checked, item.agreed, item.verifiedRewardSum
        );
    }

    function _activePeer(address account) private view returns (PeerInfo storage peer) {
        peer = _peers[account];
        if (peer.status != PeerStatus.Active) revert SwarmCoordinatorNotActive(account);
    }

    // ---------------------------------------------------------------- internal: parameters

    function _setMinStake(uint256 value) private {
        if (value == 0 || value > type(uint96).max) revert SwarmCoordinatorInvalidParameter("minStake", value);
        _params.minStake = uint96(value);
        emit ParametersChanged("minStake", value);
    }

    function _setUnbondingPeriod(uint256 value) private {
        uint256 minimum = (uint256(_params.attestationWindowRounds) + 1) * roundDuration;
        if (value < minimum || value > type(uint32).max) {
            revert SwarmCoordinatorInvalidParameter("unbondingPeriod", value);
        }
        _params.unbondingPeriod = uint32(value);
        emit ParametersChanged("unbondingPeriod", value);
    }

    function _setGraceRounds(uint256 value) private {
        if (value > _params.attestationWindowRounds) revert SwarmCoordinatorInvalidParameter("graceRounds", value);
        _params.graceRounds = uint16(value);
        emit ParametersChanged("graceRounds", value);
    }

    /// @dev The constructor skips the checks against grace and unbonding: it sets those right after.
    function _setAttestationWindowRounds(uint256 value, bool initial) private {
        bool invalid = value == 0 || value > type(uint16).max;
        if (!initial) {
            invalid = invalid || value < _params.graceRounds
                || (value + 1) * roundDuration > _params.unbondingPeriod;
        }
        if (invalid) revert SwarmCoordinatorInvalidParameter("attestationWindowRounds", value);
        _params.attestationWindowRounds = uint16(value);
        emit ParametersChanged("attestationWindowRounds", value);
    }

    function _setSlashBps(uint256 value) private {
        if (value > _BPS) revert SwarmCoordinatorInvalidParameter("slashBps", value);
        _params.slashBps = uint16(value);
        emit ParametersChanged("slashBps", value);
    }

    function _setDisputeQuorum(uint256 value) private {
        if (value == 0 || value > type(uint16).max) revert SwarmCoordinatorInvalidParameter("disputeQuorum", value);
        _params.disputeQuorum = uint16(value);
        emit ParametersChanged("disputeQuorum", value);
    }

    function _setTreasury(address treasury_) private {
        if (treasury_ == address(0)) revert SwarmCoordinatorZeroAddress();
        _treasury = treasury_;
        emit TreasuryChanged(treasury_);
    }

    function _setOwner(address newOwner) private {
        address previous = _owner;
        _owner = newOwner;
        emit OwnershipTransferred(previous, newOwner);
    }

    // ---------------------------------------------------------------- internal: helpers

    function _toStake(uint256 value) private pure returns (uint96) {
        if (value > type(uint96).max) revert SwarmCoordinatorInvalidParameter("stake", value);
        return uint96(value);
    }

    function _sendValue(address to, uint256 amount) private {
        (bool ok,) = to.call{value: amount}("");
        if (!ok) revert SwarmCoordinatorTransferFailed(to, amount);
    }

    function _buildDomainSeparator() private view returns (bytes32) {
        return keccak256(abi.encode(_DOMAIN_TYPEHASH, _NAME_HASH, _VERSION_HASH, block.chainid, address(this)));
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
