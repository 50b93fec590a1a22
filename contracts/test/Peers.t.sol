// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice register, addStake, weights, requestExit, withdraw, claim, announceEndpoint.
contract PeersTest is CoordinatorTest {
    function test_RegisterCountsFromTheNextRound() public {
        _warpToRound(3);
        vm.expectEmit(address(coordinator));
        emit I.PeerRegistered(alice, "peer", 1 ether);
        _register(alice);
        I.PeerInfo memory info = _peer(alice);
        assertTrue(info.status == I.PeerStatus.Active, "active");
        assertEq(info.stake, 1 ether, "stake");
        assertEq(info.pendingStake, 1 ether, "pending");
        assertEq(info.pendingFrom, 4, "pending from");
        assertEq(coordinator.weightAt(alice, 3), 0, "no weight in the deposit round");
        assertEq(coordinator.weightAt(alice, 4), 1 ether, "weight from the next round");
    }

    function test_RegisterRejects() public {
        vm.deal(alice, 1 ether);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInsufficientStake.selector, 1, MIN_STAKE));
        coordinator.register{value: 1}("peer");
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidName.selector, 0));
        coordinator.register{value: MIN_STAKE}("");
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidName.selector, 33));
        coordinator.register{value: MIN_STAKE}("123456789012345678901234567890123");
        _register(alice);
        vm.deal(alice, 1 ether);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadyRegistered.selector, alice));
        coordinator.register{value: MIN_STAKE}("peer");
    }

    function test_AddStakeIsPendingThenCounts() public {
        _register(alice);
        _warpToRound(R);
        vm.deal(alice, 2 ether);
        vm.expectEmit(address(coordinator));
        emit I.StakeAdded(alice, 2 ether, 3 ether, R + 1);
        vm.prank(alice);
        coordinator.addStake{value: 2 ether}();
        assertEq(coordinator.weightAt(alice, R), 1 ether, "old stake only in R");
        assertEq(coordinator.weightAt(alice, R + 1), 3 ether, "all of it from R+1");
    }

    /// @dev Stake added after a round's beacon is known never weighs in that round, even after a second deposit.
    function test_SecondDepositKeepsBothPendingWhileTheRoundCanBeJudged() public {
        _register(alice);
        _warpToRound(R + 1);
        vm.deal(alice, 3 ether);
        vm.prank(alice);
        coordinator.addStake{value: 2 ether}();
        _warpToRound(R + 2);
        vm.prank(alice);
        coordinator.addStake{value: 1 ether}();
        assertEq(coordinator.weightAt(alice, R + 1), 1 ether, "R+1 excludes both deposits");
        assertEq(coordinator.weightAt(alice, R + 2), 1 ether, "R+2 excludes both (conservative)");
        assertEq(coordinator.weightAt(alice, R + 3), 4 ether, "R+3 counts all");
        // Once no round before the deposit can be judged any more, an old pending part merges.
        _warpToRound(R + 3 + J);
        vm.deal(alice, 1);
        vm.prank(alice);
        coordinator.addStake{value: 1}();
        assertEq(_peer(alice).pendingStake, 1, "old pending merged");
        assertEq(coordinator.weightAt(alice, R + 3 + J), 4 ether, "merged part counts");
    }

    function test_AddStakeRejects() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotActive.selector, alice));
        coordinator.addStake();
        _register(alice);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInsufficientStake.selector, 0, 1));
        coordinator.addStake();
    }

    function test_ExitingPeerJudgesUpToItsExitRound() public {
        _register(alice);
        _warpToRound(R);
        vm.expectEmit(address(coordinator));
        emit I.ExitRequested(alice, R, R + BONDED);
        _exit(alice);
        assertEq(coordinator.weightAt(alice, R), 1 ether, "may judge its exit round");
        assertEq(coordinator.weightAt(alice, R + 1), 0, "not later rounds");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotActive.selector, alice));
        _exit(alice);
    }

    function test_WithdrawRules() public {
        _register(alice);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotExiting.selector, alice));
        coordinator.withdraw();
        _warpToRound(R);
        _exit(alice);
        _warpToRound(R + BONDED - 1);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorStillBonded.selector, R + BONDED));
        coordinator.withdraw();
        _warpToRound(R + BONDED);
        vm.expectEmit(address(coordinator));
        emit I.Withdrawn(alice, 1 ether);
        vm.prank(alice);
        coordinator.withdraw();
        assertEq(alice.balance, 1 ether, "paid");
        assertTrue(_peer(alice).status == I.PeerStatus.Withdrawn, "withdrawn");
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotExiting.selector, alice));
        coordinator.withdraw();
    }

    function test_WithdrawBlockedByOpenDisputeAndFlag() public {
        _register(alice);
        _register(bob);
        _register(carol);
        _register(dave);
        _warpToRound(R);
        _publish(alice, R);
        _exit(alice);
        _exit(bob);
        _judge1(R, bob, _flag(alice));
        _warpToRound(R + BONDED);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorOpenDisputes.selector, 1));
        coordinator.withdraw();
        coordinator.settle(R, alice);
        vm.prank(bob);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorOpenFlags.selector, 1));
        coordinator.withdraw();
        coordinator.resolveFlag(R, alice, bob);
        vm.prank(bob);
        coordinator.withdraw();
        // 1 ETH of flags misses the floor (a third of the 3 ETH besides alice) and no agreement outweighs it:
        // inconclusive, so the bond comes back.
        assertTrue(coordinator.verdict(R, alice).state == I.VerdictState.Inconclusive, "inconclusive");
        assertEq(bob.balance, 1 ether + COMMIT_DEPOSIT, "bob's bond returned (and its commit deposit)");
        vm.prank(alice);
        coordinator.withdraw();
        assertEq(alice.balance, 1 ether, "alice whole");
    }

    function test_ClaimNothing() public {
        vm.prank(alice);
        vm.expectRevert(I.SwarmCoordinatorNothingToClaim.selector);
        coordinator.claim();
    }

    function test_AnnounceEndpoint() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotActive.selector, alice));
        coordinator.announceEndpoint("x");
        _register(alice);
        vm.expectEmit(address(coordinator));
        emit I.EndpointAnnounced(alice, "x");
        vm.prank(alice);
        coordinator.announceEndpoint("x");
        bytes memory long = new bytes(513);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorEndpointTooLong.selector, 513, 512));
        coordinator.announceEndpoint(long);
    }
}
