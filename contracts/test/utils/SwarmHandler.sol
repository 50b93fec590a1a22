// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../../src/SwarmCoordinator.sol";
import {TestBase} from "./TestBase.sol";

/// @title SwarmHandler
/// @notice Drives a coordinator through random but valid sequences of every action (register, addStake, exit,
/// withdraw, publish, relayed publish, seal, commit, reveal, settle, resolveFlag, reportAgreement, claim,
/// scheduleParameters, pause/unpause, time) by six peers, and keeps the books the invariant test compares.
/// @dev The handler deploys the coordinator, so it is the owner. Actions that cannot apply are skipped. A check
/// that fails inside an action increments `violations` (a revert would be swallowed with fail_on_revert off).
contract SwarmHandler is TestBase {
    uint64 public constant ROUND = 120;
    uint16 public constant G = 1;
    uint16 public constant C = 2;
    uint16 public constant V = 2;
    uint64 public constant J = G + C + V;
    uint256 private constant _ACTORS = 6;
    address public constant KEEPER = address(0x4EE9);

    struct Ballot {
        uint64 round;
        address attester;
        bool revealed;
        bytes32 salt;
        I.VerdictItem[] items;
    }

    struct Dispute {
        uint64 round;
        address subject;
    }

    struct FlagRef {
        uint64 round;
        address subject;
        address flagger;
        bool resolved;
    }

    SwarmCoordinator public immutable coordinator;
    address[] private _actors; // sorted ascending, the order reveal wants
    mapping(address => uint256) private _keys;

    Ballot[] private _ballots;
    Dispute[] private _disputes;
    mapping(uint64 => mapping(address => bool)) private _disputeKnown;
    FlagRef[] private _flagRefs;
    uint64[] private _ruledRounds;
    mapping(uint64 => bytes32) public rulesHashSeen;
    mapping(uint64 => bool) private _ruled;

    uint256 public ghostPooled;
    /// @notice Commit deposits held by the contract: of ballots not revealed (yet, or ever).
    uint256 public ghostDeposits;
    uint256 public constant DEPOSIT = 0.0001 ether;
    uint256 public violations;
    mapping(bytes32 => uint256) public calls;

    constructor() {
        I.Rules memory rules = I.Rules({
            fromRound: 0,
            flagBond: 0.001 ether,
            committeeSize: 3,
            quorumBps: 5_000,
            floorBps: 3_334,
            slashBps: 2_000,
            rewardBps: 5_000,
            tipBps: 500,
            tasksPerRound: 8,
            groupSize: 8
        });
        coordinator = new SwarmCoordinator(
            ROUND,
            keccak256("invariant"),
            I.Phases({graceRounds: G, commitRounds: C, revealRounds: V}),
            0.01 ether,
            DEPOSIT,
            rules
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

    // ---------------------------------------------------------------- views for the invariant test

    function actors() external view returns (address[] memory) {
        return _actors;
    }

    function ruledRounds() external view returns (uint64[] memory) {
        return _ruledRounds;
    }

    // ---------------------------------------------------------------- peers and stake

    function register(uint256 seed, uint256 amount) external {
        (bool found, address actor) = _find(seed, I.PeerStatus.None);
        if (!found || coordinator.paused()) return;
        amount = bound(amount, coordinator.minStake(), 3 ether);
        vm.deal(actor, amount);
        vm.prank(actor);
        coordinator.register{value: amount}("peer");
        _after("register");
    }

    function addStake(uint256 seed, uint256 amount) external {
        (bool found, address actor) = _find(seed, I.PeerStatus.Active);
        if (!found || coordinator.paused()) return;
        amount = bound(amount, 1, 1 ether);
        vm.deal(actor, amount);
        vm.prank(actor);
        coordinator.addStake{value: amount}();
        _after("addStake");
    }

    function requestExit(uint256 seed) external {
        if (seed % 3 != 0) return; // keeps most peers in the game for longer
        (bool found, address actor) = _find(seed >> 2, I.PeerStatus.Active);
        if (!found) return;
        vm.prank(actor);
        coordinator.requestExit();
        _after("requestExit");
    }

    /// @notice No stake is locked for good: 2J+1 rounds after its exit, once anyone settled its disputes and
    /// resolved its flags, an exiting peer's withdraw succeeds, paused or not.
    function withdraw(uint256 seed, bool pauseFirst) external {
        (bool found, address actor) = _find(seed, I.PeerStatus.Exiting);
        if (!found) return;
        I.PeerInfo memory info = coordinator.peerInfo(actor);
        _warpTo(info.exitRound + 2 * J + 1);
        _releaseEverything(actor);
        if (pauseFirst && !coordinator.paused()) coordinator.pause();
        uint256 stake = coordinator.peerInfo(actor).stake;
        uint256 before = actor.balance;
        vm.prank(actor);
        try coordinator.withdraw() {
            if (actor.balance - before != stake) ++violations;
        } catch {
            ++violations;
        }
        _after("withdraw");
    }

    function claim(uint256 seed) external {
        address account = seed % 7 == 6 ? KEEPER : _actor(seed);
        if (coordinator.claimable(account) == 0) return;
        vm.prank(account);
        coordinator.claim();
        _after("claim");
    }

    // ---------------------------------------------------------------- publications

    function publish(uint256 seed, uint256 late) external {
        (bool ok, address actor, uint64 round) = _publisher(seed, late);
        if (!ok) return;
        vm.prank(actor);
        coordinator.publishRollouts(round, keccak256(abi.encode(actor, round)), 4, 32, 7);
        _after("publish");
    }

    function publishFor(uint256 seed, uint256 late) external {
        (bool ok, address actor, uint64 round) = _publisher(seed, late);
        if (!ok) return;
        bytes32 digest = keccak256(abi.encode(actor, round));
        uint64 deadline = uint64(block.timestamp + 60);
        bytes32 structHash = keccak256(
            abi.encode(
                coordinator.PUBLISH_TYPEHASH(), actor, round, digest, uint32(4), uint32(32), int64(7), KEEPER, deadline
            )
        );
        bytes32 hash = keccak256(abi.encodePacked("\x19\x01", coordinator.domainSeparator(), structHash));
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(_keys[actor], hash);
        vm.prank(KEEPER);
        coordinator.publishRolloutsFor(actor, round, digest, 4, 32, 7, KEEPER, deadline, abi.encodePacked(r, s, v));
        _after("publishFor");
    }

    // ---------------------------------------------------------------- committees and verdicts

    function seal(uint256 back) external {
        uint64 current = coordinator.currentRound();
        uint64 offset = G + 1 + uint64(back % C);
        if (current < offset) return;
        uint64 round = current - offset;
        if (coordinator.seal(round).beacon != bytes20(0)) return;
        if (coordinator.beaconBlock(round) == block.number) vm.roll(block.number + 1);
        coordinator.sealRound(round); // fixes the beacon block, or draws from it
        vm.setBlockhash(coordinator.beaconBlock(round), keccak256(abi.encode(back)));
        _after("seal");
    }

    function commit(uint256 seed, uint256 back, uint256 subjectMask, uint256 flagMask) external {
        uint64 current = coordinator.currentRound();
        uint64 offset = G + 1 + uint64(back % C);
        if (current < offset) return;
        uint64 round = current - offset;
        for (uint256 k = 0; k < _ACTORS; ++k) {
            address attester = _actor(seed % _ACTORS + k);
            I.PeerInfo memory info = coordinator.peerInfo(attester);
            bool may = info.status == I.PeerStatus.Active
                || (info.status == I.PeerStatus.Exiting && round <= info.exitRound);
            if (!may || coordinator.ballot(round, attester) != bytes32(0)) continue;
            Ballot storage b = _ballots.push();
            b.round = round;
            b.attester = attester;
            b.salt = bytes32(seed);
            _fillItems(b, subjectMask, flagMask);
            bytes32 commitment = keccak256(abi.encode(attester, round, keccak256(abi.encode(b.items)), b.salt));
            vm.deal(attester, attester.balance + DEPOSIT);
            vm.prank(attester);
            coordinator.commitVerdicts{value: DEPOSIT}(round, commitment);
            ghostDeposits += DEPOSIT;
            _after("commit");
            return;
        }
    }

    function reveal(uint256 index) external {
        uint64 current = coordinator.currentRound();
        uint256 n = _ballots.length;
        for (uint256 k = 0; k < n; ++k) {
            Ballot storage b = _ballots[(index % n + k) % n];
            bool inPhase = current >= b.round + G + C + 1 && current <= b.round + J;
            if (b.revealed || !inPhase || coordinator.seal(b.round).beacon == bytes20(0)) continue;
            vm.prank(b.attester);
            coordinator.revealVerdicts(b.round, b.items, b.salt);
            ghostDeposits -= DEPOSIT;
            b.revealed = true;
            _bookReveal(b);
            _after("reveal");
            return;
        }
    }

    function settle(uint256 index) external {
        uint256 n = _disputes.length;
        for (uint256 k = 0; k < n; ++k) {
            Dispute memory d = _disputes[(index % n + k) % n];
            if (coordinator.verdict(d.round, d.subject).state != I.VerdictState.Published) continue;
            if (coordinator.currentRound() < d.round + J + 1) continue;
            _settle(d.round, d.subject);
            return;
        }
    }

    function resolveFlag(uint256 index) external {
        uint256 n = _flagRefs.length;
        for (uint256 k = 0; k < n; ++k) {
            FlagRef storage f = _flagRefs[(index % n + k) % n];
            I.VerdictState state = coordinator.verdict(f.round, f.subject).state;
            if (f.resolved || state == I.VerdictState.Published) continue;
            _resolve(f);
            return;
        }
    }

    function reportAgreement(uint256 index) external {
        uint256 n = _ballots.length;
        for (uint256 k = 0; k < n; ++k) {
            Ballot storage b = _ballots[(index % n + k) % n];
            if (!b.revealed || coordinator.peerInfo(b.attester).status == I.PeerStatus.Withdrawn) continue;
            for (uint256 i = 0; i < b.items.length; ++i) {
                I.VerdictItem memory item = b.items[i];
                if (item.agreed != item.checked) continue;
                if (coordinator.verdict(b.round, item.subject).state != I.VerdictState.Upheld) continue;
                vm.prank(KEEPER);
                try coordinator.reportAgreement(b.round, b.attester, b.items, i) {
                    _after("reportAgreement");
                    return;
                } catch {} // penalized already
            }
        }
    }

    // ---------------------------------------------------------------- owner and time

    function scheduleParameters(uint256 seed, uint256 bps) external {
        I.Rules memory rules = I.Rules({
            fromRound: 0,
            flagBond: uint96(bound(seed, 1, 0.01 ether)),
            committeeSize: uint16(bound(seed >> 64, 1, 64)),
            quorumBps: uint16(bound(bps, 5_000, 9_999)),
            floorBps: uint16(bound(bps >> 16, 0, 10_000)),
            slashBps: uint16(bound(bps >> 32, 1, 10_000)),
            rewardBps: uint16(bound(bps >> 48, 0, 5_000)),
            tipBps: uint16(bound(bps >> 64, 0, 5_000)),
            tasksPerRound: 8,
            groupSize: 8
        });
        // A minimum-stake change is refused for g rounds after the previous one took effect.
        try coordinator.scheduleParameters(bound(seed >> 128, 0.001 ether, 2 ether), rules) {} catch {}
        _after("scheduleParameters");
    }

    function togglePause(uint256 seed) external {
        if (coordinator.paused()) {
            coordinator.unpause();
            _after("unpause");
        } else if (seed % 3 == 0) {
            coordinator.pause();
            _after("pause");
        }
    }

    function warp(uint256 secondsForward) external {
        vm.warp(block.timestamp + bound(secondsForward, 1, 2 * uint256(ROUND)));
        vm.roll(block.number + 1);
        _after("warp");
    }

    // ---------------------------------------------------------------- internal

    /// @dev Settles every dispute of `actor` and resolves every flag it raised (and the disputes those need).
    function _releaseEverything(address actor) private {
        for (uint256 i = 0; i < _disputes.length; ++i) {
            Dispute memory d = _disputes[i];
            if (d.subject != actor || coordinator.verdict(d.round, d.subject).state != I.VerdictState.Published) {
                continue;
            }
            _settle(d.round, d.subject);
        }
        for (uint256 i = 0; i < _flagRefs.length; ++i) {
            FlagRef storage f = _flagRefs[i];
            if (f.flagger != actor || f.resolved) continue;
            if (coordinator.verdict(f.round, f.subject).state == I.VerdictState.Published) _settle(f.round, f.subject);
            _resolve(f);
        }
    }

    function _settle(uint64 round, address subject) private {
        vm.prank(KEEPER);
        coordinator.settle(round, subject);
        ghostPooled += coordinator.rewardPool(round, subject);
        _after("settle");
    }

    function _resolve(FlagRef storage f) private {
        bool upheld = coordinator.verdict(f.round, f.subject).state == I.VerdictState.Upheld;
        uint256 claimableBefore = coordinator.claimable(f.flagger);
        uint256 burnedBefore = coordinator.burned();
        coordinator.resolveFlag(f.round, f.subject, f.flagger);
        f.resolved = true;
        if (upheld) {
            ghostPooled -= (coordinator.claimable(f.flagger) - claimableBefore) + (coordinator.burned() - burnedBefore);
        }
        _after("resolveFlag");
    }

    function _bookReveal(Ballot storage b) private {
        for (uint256 i = 0; i < b.items.length; ++i) {
            address subject = b.items[i].subject;
            if (coordinator.flagWeight(b.round, subject, b.attester) == 0) continue;
            _flagRefs.push(FlagRef({round: b.round, subject: subject, flagger: b.attester, resolved: false}));
            if (!_disputeKnown[b.round][subject]) {
                _disputeKnown[b.round][subject] = true;
                _disputes.push(Dispute({round: b.round, subject: subject}));
            }
        }
    }

    function _fillItems(Ballot storage b, uint256 subjectMask, uint256 flagMask) private {
        for (uint256 i = 0; i < _ACTORS; ++i) {
            address subject = _actors[i];
            if (subject == b.attester || uint256(keccak256(abi.encode(subjectMask, i))) % 4 == 0) continue;
            if (coordinator.verdict(b.round, subject).state != I.VerdictState.Published) continue;
            bool isFlag = uint256(keccak256(abi.encode(flagMask, i))) % 2 == 0;
            b.items.push(I.VerdictItem({subject: subject, checked: 8, agreed: isFlag ? 5 : 8, verifiedRewardSum: 5}));
        }
    }

    function _publisher(uint256 seed, uint256 late) private view returns (bool, address, uint64) {
        if (coordinator.paused()) return (false, address(0), 0);
        uint64 current = coordinator.currentRound();
        uint64 back = uint64(late % (G + 1));
        if (back > current) back = 0;
        uint64 round = current - back;
        for (uint256 k = 0; k < _ACTORS; ++k) {
            address actor = _actor(seed % _ACTORS + k);
            I.PeerInfo memory info = coordinator.peerInfo(actor);
            if (info.status != I.PeerStatus.Active || info.stake < coordinator.minStake()) continue;
            if (coordinator.verdict(round, actor).state != I.VerdictState.None) continue;
            return (true, actor, round);
        }
        return (false, address(0), 0);
    }

    function _warpTo(uint64 round) private {
        uint256 at = coordinator.genesis() + uint256(round) * ROUND;
        if (block.timestamp < at) {
            vm.warp(at);
            vm.roll(block.number + 1);
        }
    }

    /// @dev Records the rules of the current round the first time the campaign is in it.
    function _after(bytes32 action) private {
        ++calls[action];
        uint64 current = coordinator.currentRound();
        if (!_ruled[current]) {
            _ruled[current] = true;
            _ruledRounds.push(current);
            rulesHashSeen[current] = keccak256(abi.encode(coordinator.rulesAt(current)));
        }
    }

    function _find(uint256 seed, I.PeerStatus status) private view returns (bool, address) {
        for (uint256 k = 0; k < _ACTORS; ++k) {
            address actor = _actor(seed % _ACTORS + k);
            if (coordinator.peerInfo(actor).status == status) return (true, actor);
        }
        return (false, address(0));
    }

    function _actor(uint256 seed) private view returns (address) {
        return _actors[seed % _ACTORS];
    }
}
