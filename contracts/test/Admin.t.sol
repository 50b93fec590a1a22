// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice Constructor checks, scheduleParameters and rulesAt, pause scope, ownership.
contract AdminTest is CoordinatorTest {
    /// @dev EIP-170: public chains (and a default Anvil) refuse runtime code over 24,576 bytes.
    function test_RuntimeCodeFitsEip170() public view {
        assertLe(address(coordinator).code.length, 24_576, "runtime code over the EIP-170 limit");
    }

    function test_ConstructorChecksPhases() public {
        I.Phases memory phases = defaultPhases();
        phases.commitRounds = 0;
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidParameter.selector, bytes32("commitRounds"), 0));
        new SwarmCoordinator(ROUND, SEED_INPUT, phases, MIN_STAKE, COMMIT_DEPOSIT, defaultRules());
        phases = defaultPhases();
        phases.revealRounds = 0;
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidParameter.selector, bytes32("revealRounds"), 0));
        new SwarmCoordinator(ROUND, SEED_INPUT, phases, MIN_STAKE, COMMIT_DEPOSIT, defaultRules());
        phases = defaultPhases();
        phases.graceRounds = 65;
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidParameter.selector, bytes32("graceRounds"), 65));
        new SwarmCoordinator(ROUND, SEED_INPUT, phases, MIN_STAKE, COMMIT_DEPOSIT, defaultRules());
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidParameter.selector, bytes32("roundDuration"), 0));
        new SwarmCoordinator(0, SEED_INPUT, defaultPhases(), MIN_STAKE, COMMIT_DEPOSIT, defaultRules());
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidParameter.selector, bytes32("minStake"), 0));
        new SwarmCoordinator(ROUND, SEED_INPUT, defaultPhases(), 0, COMMIT_DEPOSIT, defaultRules());
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidParameter.selector, bytes32("commitDeposit"), 0));
        new SwarmCoordinator(ROUND, SEED_INPUT, defaultPhases(), MIN_STAKE, 0, defaultRules());
    }

    function test_ConstructorState() public view {
        assertEq(coordinator.owner(), owner, "owner");
        assertEq(coordinator.genesis(), START, "genesis");
        assertEq(coordinator.roundDuration(), ROUND, "round");
        assertEq(coordinator.rulesCount(), 1, "one rules entry");
        assertEq(coordinator.rulesByIndex(0).fromRound, 0, "from round 0");
        assertEq(coordinator.rulesAt(123).committeeSize, COMMITTEE, "rules");
        assertEq(coordinator.minStake(), MIN_STAKE, "min stake");
        assertFalse(coordinator.paused(), "unpaused");
    }

    function test_ScheduleValidates() public {
        _expectInvalid(0, defaultRules(), "minStake", 0);
        I.Rules memory rules = defaultRules();
        rules.flagBond = 0;
        _expectInvalid(MIN_STAKE, rules, "flagBond", 0);
        rules = defaultRules();
        rules.committeeSize = 0;
        _expectInvalid(MIN_STAKE, rules, "committeeSize", 0);
        rules = defaultRules();
        rules.quorumBps = 4_999;
        _expectInvalid(MIN_STAKE, rules, "quorumBps", 4_999);
        // Finding 7 of the v2 review: a 100 % quorum could never be passed, so unanimous flags lost their bonds.
        rules.quorumBps = 10_000;
        _expectInvalid(MIN_STAKE, rules, "quorumBps", 10_000);
        rules = defaultRules();
        rules.floorBps = 10_001;
        _expectInvalid(MIN_STAKE, rules, "floorBps", 10_001);
        rules = defaultRules();
        rules.slashBps = 10_001;
        _expectInvalid(MIN_STAKE, rules, "slashBps", 10_001);
        rules.slashBps = 0;
        _expectInvalid(MIN_STAKE, rules, "slashBps", 0);
        rules = defaultRules();
        rules.tasksPerRound = 0;
        _expectInvalid(MIN_STAKE, rules, "tasksPerRound", 0);
        rules.tasksPerRound = 65;
        _expectInvalid(MIN_STAKE, rules, "tasksPerRound", 65);
        rules = defaultRules();
        rules.groupSize = 1;
        _expectInvalid(MIN_STAKE, rules, "groupSize", 1);
        rules.groupSize = 33;
        _expectInvalid(MIN_STAKE, rules, "groupSize", 33);
        rules = defaultRules();
        rules.rewardBps = 9_600;
        _expectInvalid(MIN_STAKE, rules, "rewardBps", 10_100);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotOwner.selector, stranger));
        coordinator.scheduleParameters(MIN_STAKE, defaultRules());
    }

    function _expectInvalid(uint256 minStake, I.Rules memory rules, bytes32 name, uint256 value) private {
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidParameter.selector, name, value));
        coordinator.scheduleParameters(minStake, rules);
    }

    function test_ScheduleReplacesPendingAndAppendsActive() public {
        _warpToRound(R);
        I.Rules memory rules = defaultRules();
        rules.slashBps = 1;
        uint64 first = coordinator.scheduleParameters(1 ether, rules);
        assertEq(first, R + J + 1, "from");
        _warpToRound(R + 1);
        rules.slashBps = 2;
        uint64 second = coordinator.scheduleParameters(2 ether, rules);
        assertEq(coordinator.rulesCount(), 2, "pending entry replaced");
        assertEq(coordinator.rulesAt(first).slashBps, SLASH_BPS, "the replaced change never applies");
        assertEq(coordinator.rulesAt(second).slashBps, 2, "the new one does");
        assertEq(coordinator.rulesAt(second - 1).slashBps, SLASH_BPS, "not before");
        _warpToRound(second);
        assertEq(coordinator.minStake(), 2 ether, "min stake in force");
        rules.slashBps = 3;
        // Batches of the round before `second` are accepted until second + g, under the old minimum.
        vm.expectRevert(
            abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, second, second + GRACE, type(uint64).max)
        );
        coordinator.scheduleParameters(3 ether, rules);
        _warpToRound(second + GRACE);
        uint64 third = coordinator.scheduleParameters(3 ether, rules);
        assertEq(coordinator.rulesCount(), 3, "active entry kept, new one appended");
        assertEq(coordinator.minStake(), 2 ether, "still 2 until the third change");
        assertEq(coordinator.rulesAt(third).slashBps, 3, "third");
        assertEq(coordinator.rulesAt(third - 1).slashBps, 2, "second");
        assertEq(coordinator.rulesAt(0).slashBps, SLASH_BPS, "first");
        _warpToRound(third);
        assertEq(coordinator.minStake(), 3 ether, "third min stake");
    }

    function test_PauseBlocksOnlyDeposits() public {
        _register(alice);
        coordinator.pause();
        vm.expectRevert(I.SwarmCoordinatorPaused.selector);
        coordinator.pause();
        vm.deal(bob, 1 ether);
        vm.prank(bob);
        vm.expectRevert(I.SwarmCoordinatorPaused.selector);
        coordinator.register{value: 1 ether}("peer");
        vm.deal(alice, 1 ether);
        vm.prank(alice);
        vm.expectRevert(I.SwarmCoordinatorPaused.selector);
        coordinator.addStake{value: 1 ether}();
        vm.prank(alice);
        coordinator.announceEndpoint("x");
        _exit(alice);
        _warpToRound(BONDED);
        vm.prank(alice);
        coordinator.withdraw();
        coordinator.unpause();
        vm.expectRevert(I.SwarmCoordinatorNotPaused.selector);
        coordinator.unpause();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotOwner.selector, stranger));
        coordinator.pause();
    }

    function test_OwnershipTransfer() public {
        coordinator.transferOwnership(alice);
        assertEq(coordinator.pendingOwner(), alice, "pending");
        vm.prank(bob);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotPendingOwner.selector, bob));
        coordinator.acceptOwnership();
        vm.prank(alice);
        coordinator.acceptOwnership();
        assertEq(coordinator.owner(), alice, "owner");
        assertEq(coordinator.pendingOwner(), address(0), "cleared");
    }
}
