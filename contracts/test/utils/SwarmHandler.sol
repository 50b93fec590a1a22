// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator} from "../../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../../src/SwarmCoordinator.sol";
import {TestBase} from "./TestBase.sol";

/// @title SwarmHandler
/// @notice Drives a coordinator through random but valid sequences (register, addStake, exit, withdraw,
/// publish, relayed publish, attest, settle, claim, owner changes, pause, time) by eight peers, and keeps
/// ghost books of every ether flow and every dispute so the invariant test can compare.
/// @dev The handler deploys the coordinator: it is owner and treasury. Actions that would revert are skipped,
/// so the campaign spends its calls on state changes. A check that fails inside an action increments
/// `violations` (a revert here would be swallowed with fail_on_revert = false).
contract SwarmHandler is TestBase {
    uint64 public constant ROUND = 600;
    uint16 public constant GRACE = 1;
    uint16 public constant WINDOW = 2;
    uint256 private constant _ACTORS = 8;
    address private constant _SPONSOR = address(0x5905);

    SwarmCoordinator public immutable coordinator;
    address[] private _actors; // sorted ascending, the order attest() wants
    mapping(address => uint256) private _keys;

    // ghost books
    uint256 public ghostDeposited;
    uint256 public ghostWithdrawn;
    uint256 public ghostSlashed;
    uint256 public ghostClaimed;
    uint256 public violations;
    mapping(address => uint256) public ghostOpenDisputes;
    mapping(uint64 => mapping(address => uint256)) public ghostFlags;
    mapping(uint64 => mapping(address => uint256)) public ghostAgreements;
    mapping(uint64 => mapping(address => bool)) public ghostSettled;
    mapping(uint64 => mapping(address => bool)) private _tracked;
    uint64[] private _trackedRounds;
    address[] private _trackedSubjects;
    mapping(bytes32 => uint256) public calls;

    constructor() {
        coordinator = new SwarmCoordinator(
            ROUND,
            keccak256("invariant"),
            ISwarmCoordinator.Parameters({
                minStake: 1 ether,
                unbondingPeriod: uint32((WINDOW + 1) * ROUND),
                graceRounds: GRACE,
                attestationWindowRounds: WINDOW,
                slashBps: 2_500,
                disputeQuorum: 1,
                paused: false
            })
        );
        for (uint256 i = 0; i < _ACTORS; ++i) {
            uint256 key = 0x1000 + i;
            address actor = vm.addr(key);
            _keys[actor] = key;
            _actors.push(actor);
        }
        for (uint256 i = 1; i < _ACTORS; ++i) {
            for (uint256 j = i; j > 0 && _actors[j] < _actors[j - 1]; --j) {
                (_actors[j], _actors[j - 1]) = (_actors[j - 1], _actors[j]);
            }
        }
    }

    /// @dev Treasury payouts land here.
    receive() external payable {}

    // ---------------------------------------------------------------- views for the invariant test

    function actors() external view returns (address[] memory) {
        return _actors;
    }

    function trackedCount() external view returns (uint256) {
        return _trackedRounds.length;
    }

    function tracked(uint256 i) external view returns (uint64 round, address subject) {
        return (_trackedRounds[i], _trackedSubjects[i]);
    }

    // ---------------------------------------------------------------- peers and stake

    function register(uint256 actorSeed, uint256 amount) external {
        (bool found, address actor) = _find(actorSeed, ISwarmCoordinator.PeerStatus.None);
        if (!found || coordinator.paused()) return;
        amount = bound(amount, coordinator.parameters().minStake, 5 ether);
        vm.deal(actor, amount);
        vm.prank(actor);
        coordinator.register{value: amount}("peer");
        ghostDeposited += amount;
        ++calls["register"];
    }

    function addStake(uint256 actorSeed, uint256 amount) external {
        (bool found, address actor) = _find(actorSeed, ISwarmCoordinator.PeerStatus.Active);
        if (!found || coordinator.paused()) return;
        amount = bound(amount, 1, 2 ether);
        vm.deal(actor, amount);
        vm.prank(actor);
        coordinator.addStake{value: amount}();
        ghostDeposited += amount;
        ++calls["addStake"];
    }

    function requestExit(uint256 actorSeed) external {
        // One try in two exits: keeps most peers in the game for longer.
        if (actorSeed % 2 != 0) return;
        (bool found, address actor) = _find(actorSeed >> 1, ISwarmCoordinator.PeerStatus.Active);
        if (!found) return;
        vm.prank(actor);
        coordinator.requestExit();
        ++calls["requestExit"];
    }

    /// @dev Picks the first exiting peer from `actorSeed` on and, if needed, waits out its unbonding.
    function withdraw(uint256 actorSeed) external {
        (bool found, address actor) = _find(actorSeed, ISwarmCoordinator.PeerStatus.Exiting);
        if (!found) return;
        ISwarmCoordinator.PeerInfo memory info = coordinator.peerInfo(actor);
        if (block.timestamp < info.withdrawableAt) vm.warp(info.withdrawableAt);
        if (info.openDisputes != 0) {
            // Must fail with OpenDisputes; try/catch, because a revert here would be swallowed by the campaign.
            bytes memory expected =
                abi.encodeWithSelector(ISwarmCoordinator.SwarmCoordinatorOpenDisputes.selector, info.openDisputes);
            vm.prank(actor);
            try coordinator.withdraw() {
                ++violations;
            } catch (bytes memory reason) {
                if (keccak256(reason) != keccak256(expected)) ++violations;
            }
            ++calls["withdrawBlocked"];
            return;
        }
        uint256 before = actor.balance;
        vm.prank(actor);
        coordinator.withdraw();
        if (actor.balance - before != info.stake) ++violations;
        ghostWithdrawn += info.stake;
        ++calls["withdraw"];
    }

    // ---------------------------------------------------------------- publications

    function publish(uint256 actorSeed, uint256 lateSeed) external {
        (bool ok, address actor, uint64 round) = _findPublisher(actorSeed, lateSeed);
        if (!ok) return;
        bytes32 digest = _digestOf(actor, round);
        vm.prank(actor);
        coordinator.publishRollouts(round, digest, 4, 32, int64(int256(lateSeed % 32_000)));
        ++calls["publish"];
    }

    function publishFor(uint256 actorSeed, uint256 lateSeed) external {
        (bool ok, address actor, uint64 round) = _findPublisher(actorSeed, lateSeed);
        if (!ok) return;
        bytes32 digest = _digestOf(actor, round);
        bytes32 structHash = keccak256(
            abi.encode(coordinator.PUBLISH_TYPEHASH(), actor, round, digest, uint32(4), uint32(32), int64(7))
        );
        bytes32 hash = keccak256(abi.encodePacked("\x19\x01", coordinator.domainSeparator(), structHash));
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(_keys[actor], hash);
        vm.prank(_SPONSOR);
        coordinator.publishRolloutsFor(actor, round, digest, 4, 32, 7, abi.encodePacked(r, s, v));
        ++calls["publishFor"];
    }

    // ---------------------------------------------------------------- attestations and disputes

    /// @dev The first active peer from `attesterSeed` on that has something to attest in the chosen round
    /// attests about three in four published batches of the round (chosen by `subjectMask`), flagging about
    /// one in two (chosen by `flagMask`).
    function attest(uint256 attesterSeed, uint256 roundSeed, uint256 subjectMask, uint256 flagMask) external {
        if (coordinator.paused()) return;
        uint64 current = coordinator.currentRound();
        uint64 back = uint64(roundSeed % (WINDOW + 1));
        if (back > current) back = current;
        uint64 round = current - back;
        for (uint256 k = 0; k < _ACTORS; ++k) {
            address attester = _actor(attesterSeed % _ACTORS + k);
            ISwarmCoordinator.PeerInfo memory info = coordinator.peerInfo(attester);
            if (info.status != ISwarmCoordinator.PeerStatus.Active || round < info.nextAttestRound) continue;
            ISwarmCoordinator.Attestation[] memory items = _items(attester, round, subjectMask, flagMask);
            if (items.length == 0) continue;
            vm.prank(attester);
            coordinator.attest(items);
            for (uint256 i = 0; i < items.length; ++i) {
                _book(items[i]);
            }
            ++calls["attest"];
            return;
        }
    }

    /// @dev Picks the first open dispute from `indexSeed` on and, if needed, waits for its window to close.
    function settle(uint256 indexSeed) external {
        uint256 n = _trackedRounds.length;
        if (n == 0 || coordinator.paused()) return;
        for (uint256 k = 0; k < n; ++k) {
            uint256 i = (indexSeed % n + k) % n;
            uint64 round = _trackedRounds[i];
            address subject = _trackedSubjects[i];
            if (ghostFlags[round][subject] == 0 || ghostSettled[round][subject]) continue;
            uint256 settleableAt = coordinator.genesis() + (uint256(round) + WINDOW + 1) * ROUND;
            if (block.timestamp < settleableAt) vm.warp(settleableAt);
            _settle(round, subject);
            return;
        }
    }

    function claim() external {
        uint256 amount = coordinator.unclaimedSlashes();
        if (amount == 0) return;
        uint256 before = address(this).balance;
        coordinator.claimSlashedFunds();
        if (address(this).balance - before != amount) ++violations;
        ghostClaimed += amount;
        ++calls["claim"];
    }

    // ---------------------------------------------------------------- owner and time

    function setSlashBps(uint256 bps) external {
        coordinator.setSlashBps(bound(bps, 0, 10_000));
        ++calls["setSlashBps"];
    }

    function setMinStake(uint256 amount) external {
        coordinator.setMinStake(bound(amount, 0.5 ether, 2 ether));
        ++calls["setMinStake"];
    }

    function setDisputeQuorum(uint256 quorum) external {
        coordinator.setDisputeQuorum(bound(quorum, 1, 3));
        ++calls["setDisputeQuorum"];
    }

    function togglePause(uint256 seed) external {
        if (coordinator.paused()) {
            coordinator.unpause();
            ++calls["unpause"];
        } else if (seed % 4 == 0) {
            coordinator.pause();
            ++calls["pause"];
        }
    }

    function warp(uint256 secondsForward) external {
        vm.warp(block.timestamp + bound(secondsForward, 1, 2 * uint256(ROUND)));
        ++calls["warp"];
    }

    // ---------------------------------------------------------------- internal

    function _settle(uint64 round, address subject) private {
        ISwarmCoordinator.PeerInfo memory before = coordinator.peerInfo(subject);
        ISwarmCoordinator.Parameters memory params = coordinator.parameters();
        uint256 flags = ghostFlags[round][subject];
        bool slash = flags >= params.disputeQuorum && flags > ghostAgreements[round][subject];
        uint256 expected = slash ? uint256(before.stake) * params.slashBps / 10_000 : 0;
        coordinator.settle(round, subject);
        uint256 taken = before.stake - coordinator.peerInfo(subject).stake;
        if (taken != expected) ++violations;
        ghostSettled[round][subject] = true;
        --ghostOpenDisputes[subject];
        ghostSlashed += taken;
        ++calls[slash ? bytes32("settleSlash") : bytes32("settleNoSlash")];
    }

    function _book(ISwarmCoordinator.Attestation memory item) private {
        if (!_tracked[item.round][item.subject]) {
            _tracked[item.round][item.subject] = true;
            _trackedRounds.push(item.round);
            _trackedSubjects.push(item.subject);
        }
        if (item.agreed < item.checked) {
            if (ghostFlags[item.round][item.subject] == 0) ++ghostOpenDisputes[item.subject];
            ++ghostFlags[item.round][item.subject];
        } else {
            ++ghostAgreements[item.round][item.subject];
        }
    }

    function _items(address attester, uint64 round, uint256 subjectMask, uint256 flagMask)
        private
        view
        returns (ISwarmCoordinator.Attestation[] memory items)
    {
        items = new ISwarmCoordinator.Attestation[](_ACTORS);
        uint256 count = 0;
        for (uint256 i = 0; i < _ACTORS; ++i) {
            address subject = _actors[i];
            // Hashing the fuzzed masks spreads the choices: fuzz dictionaries are full of zeros and small values.
            if (subject == attester || uint256(keccak256(abi.encode(subjectMask, i))) % 4 == 0) continue;
            bytes32 digest = coordinator.publication(round, subject);
            if (digest == bytes32(0)) continue;
            bool isFlag = uint256(keccak256(abi.encode(flagMask, i))) % 2 == 0;
            items[count++] = ISwarmCoordinator.Attestation({
                round: round,
                subject: subject,
                digest: digest,
                checked: 8,
                agreed: isFlag ? 5 : 8,
                verifiedRewardSum: 5_000
            });
        }
        // Trims the array to the items filled; `items` is a fresh memory array owned by this function.
        assembly {
            mstore(items, count)
        }
    }

    function _find(uint256 seed, ISwarmCoordinator.PeerStatus status) private view returns (bool, address) {
        for (uint256 k = 0; k < _ACTORS; ++k) {
            address actor = _actor(seed % _ACTORS + k);
            if (_status(actor) == status) return (true, actor);
        }
        return (false, address(0));
    }

    function _findPublisher(uint256 seed, uint256 lateSeed) private view returns (bool, address, uint64) {
        for (uint256 k = 0; k < _ACTORS; ++k) {
            address actor = _actor(seed % _ACTORS + k);
            (bool ok, uint64 round) = _publishable(actor, lateSeed);
            if (ok) return (true, actor, round);
        }
        return (false, address(0), 0);
    }

    function _publishable(address actor, uint256 lateSeed) private view returns (bool, uint64) {
        if (coordinator.paused()) return (false, 0);
        ISwarmCoordinator.PeerInfo memory info = coordinator.peerInfo(actor);
        if (info.status != ISwarmCoordinator.PeerStatus.Active) return (false, 0);
        if (info.stake < coordinator.parameters().minStake) return (false, 0);
        uint64 current = coordinator.currentRound();
        uint64 late = uint64(lateSeed % (GRACE + 1));
        if (late > current) late = 0;
        uint64 round = current - late;
        if (coordinator.publication(round, actor) != bytes32(0)) return (false, 0);
        return (true, round);
    }

    function _digestOf(address actor, uint64 round) private pure returns (bytes32) {
        return keccak256(abi.encode("batch", actor, round));
    }

    function _actor(uint256 seed) private view returns (address) {
        return _actors[seed % _ACTORS];
    }

    function _status(address actor) private view returns (ISwarmCoordinator.PeerStatus) {
        return coordinator.peerInfo(actor).status;
    }
}
