// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CoordinatorTest} from "./utils/CoordinatorTest.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";

/// @notice Owner-settable parameters, treasury, pause and two-step ownership.
contract AdminTest is CoordinatorTest {
    address internal newOwner = address(0x0E1E);

    // ---------------------------------------------------------------- onlyOwner

    function test_OwnerFunctions_RevertForOthers() public {
        bytes[] memory calls = new bytes[](10);
        calls[0] = abi.encodeCall(SwarmCoordinator.setMinStake, (2 ether));
        calls[1] = abi.encodeCall(SwarmCoordinator.setUnbondingPeriod, (UNBONDING + 1));
        calls[2] = abi.encodeCall(SwarmCoordinator.setGraceRounds, (0));
        calls[3] = abi.encodeCall(SwarmCoordinator.setAttestationWindowRounds, (3));
        calls[4] = abi.encodeCall(SwarmCoordinator.setSlashBps, (500));
        calls[5] = abi.encodeCall(SwarmCoordinator.setDisputeQuorum, (3));
        calls[6] = abi.encodeCall(SwarmCoordinator.setTreasury, (stranger));
        calls[7] = abi.encodeCall(SwarmCoordinator.pause, ());
        calls[8] = abi.encodeCall(SwarmCoordinator.unpause, ());
        calls[9] = abi.encodeCall(SwarmCoordinator.transferOwnership, (stranger));
        for (uint256 i = 0; i < calls.length; ++i) {
            vm.prank(stranger);
            (bool ok, bytes memory reason) = address(coordinator).call(calls[i]);
            assertFalse(ok, "call by a stranger must fail");
            assertEq(
                keccak256(reason),
                keccak256(abi.encodeWithSelector(SwarmCoordinatorNotOwner.selector, stranger)),
                "NotOwner(stranger)"
            );
        }
        // Nothing changed.
        Parameters memory p = coordinator.parameters();
        assertEq(p.minStake, MIN_STAKE, "minStake");
        assertEq(p.slashBps, SLASH_BPS, "slashBps");
        assertEq(coordinator.treasury(), owner, "treasury");
        assertEq(coordinator.pendingOwner(), address(0), "pendingOwner");
    }

    // ---------------------------------------------------------------- minStake

    function test_SetMinStake_Boundaries() public {
        _expectInvalid(SwarmCoordinator.setMinStake.selector, "minStake", 0);
        _expectSet(SwarmCoordinator.setMinStake.selector, "minStake", 1);
        _expectSet(SwarmCoordinator.setMinStake.selector, "minStake", type(uint96).max);
        _expectInvalid(SwarmCoordinator.setMinStake.selector, "minStake", uint256(type(uint96).max) + 1);
        assertEq(coordinator.parameters().minStake, type(uint96).max, "last valid value kept");
    }

    function testFuzz_SetMinStake(uint256 value) public {
        if (value == 0 || value > type(uint96).max) {
            _expectInvalid(SwarmCoordinator.setMinStake.selector, "minStake", value);
        } else {
            _expectSet(SwarmCoordinator.setMinStake.selector, "minStake", value);
            assertEq(coordinator.parameters().minStake, value, "minStake");
        }
    }

    function test_SetMinStake_AppliesToNewRegistrations() public {
        coordinator.setMinStake(2 ether);
        vm.deal(alice, 2 ether);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInsufficientStake.selector, 1 ether, 2 ether));
        vm.prank(alice);
        coordinator.register{value: 1 ether}("alice");
        vm.prank(alice);
        coordinator.register{value: 2 ether}("alice");
    }

    // ---------------------------------------------------------------- unbondingPeriod

    function test_SetUnbondingPeriod_Boundaries() public {
        uint256 minimum = (uint256(WINDOW) + 1) * ROUND;
        _expectInvalid(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", minimum - 1);
        _expectSet(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", minimum);
        _expectSet(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", type(uint32).max);
        _expectInvalid(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", uint256(type(uint32).max) + 1);
        assertEq(coordinator.parameters().unbondingPeriod, type(uint32).max, "unbondingPeriod");
    }

    function testFuzz_SetUnbondingPeriod(uint256 value) public {
        uint256 minimum = (uint256(WINDOW) + 1) * ROUND;
        if (value < minimum || value > type(uint32).max) {
            _expectInvalid(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", value);
        } else {
            _expectSet(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", value);
            assertEq(coordinator.parameters().unbondingPeriod, value, "unbondingPeriod");
        }
    }

    function test_SetUnbondingPeriod_AppliesToLaterExits() public {
        _register(alice);
        _register(bob);
        _exit(alice);
        coordinator.setUnbondingPeriod(10 * uint256(ROUND));
        _exit(bob);
        assertEq(_peer(alice).withdrawableAt, START + UNBONDING, "earlier exit keeps its date");
        assertEq(_peer(bob).withdrawableAt, START + 10 * uint256(ROUND), "later exit uses the new period");
    }

    // ---------------------------------------------------------------- graceRounds

    function test_SetGraceRounds_Boundaries() public {
        _expectSet(SwarmCoordinator.setGraceRounds.selector, "graceRounds", 0);
        _expectSet(SwarmCoordinator.setGraceRounds.selector, "graceRounds", WINDOW);
        _expectInvalid(SwarmCoordinator.setGraceRounds.selector, "graceRounds", WINDOW + 1);
        _expectInvalid(SwarmCoordinator.setGraceRounds.selector, "graceRounds", type(uint256).max);
        assertEq(coordinator.parameters().graceRounds, WINDOW, "graceRounds");
    }

    function testFuzz_SetGraceRounds(uint256 value) public {
        if (value > WINDOW) {
            _expectInvalid(SwarmCoordinator.setGraceRounds.selector, "graceRounds", value);
        } else {
            _expectSet(SwarmCoordinator.setGraceRounds.selector, "graceRounds", value);
            assertEq(coordinator.parameters().graceRounds, value, "graceRounds");
        }
    }

    // ---------------------------------------------------------------- attestationWindowRounds

    function test_SetAttestationWindowRounds_Boundaries() public {
        bytes4 sel = SwarmCoordinator.setAttestationWindowRounds.selector;
        _expectInvalid(sel, "attestationWindowRounds", 0);
        // UNBONDING is 4 rounds: the window may grow to 3 (its end + 1 round fits the unbonding period).
        _expectSet(sel, "attestationWindowRounds", 3);
        _expectInvalid(sel, "attestationWindowRounds", 4);
        // Not below the grace window.
        coordinator.setGraceRounds(3);
        _expectInvalid(sel, "attestationWindowRounds", 2);
        _expectSet(sel, "attestationWindowRounds", 3);
        // Not above uint16, however long the unbonding period.
        coordinator.setUnbondingPeriod(type(uint32).max);
        _expectSet(sel, "attestationWindowRounds", type(uint16).max);
        _expectInvalid(sel, "attestationWindowRounds", uint256(type(uint16).max) + 1);
        _expectInvalid(sel, "attestationWindowRounds", type(uint256).max);
        assertEq(coordinator.parameters().attestationWindowRounds, type(uint16).max, "window");
    }

    function testFuzz_SetAttestationWindowRounds(uint256 value, uint256 grace, uint256 unbondingRounds) public {
        grace = bound(grace, 0, WINDOW);
        unbondingRounds = bound(unbondingRounds, WINDOW + 1, 200);
        value = bound(value, 0, 300);
        coordinator.setUnbondingPeriod(unbondingRounds * ROUND);
        coordinator.setGraceRounds(grace);
        bool valid = value >= 1 && value >= grace && (value + 1) <= unbondingRounds;
        if (valid) {
            _expectSet(SwarmCoordinator.setAttestationWindowRounds.selector, "attestationWindowRounds", value);
            assertEq(coordinator.parameters().attestationWindowRounds, value, "window");
        } else {
            _expectInvalid(SwarmCoordinator.setAttestationWindowRounds.selector, "attestationWindowRounds", value);
        }
    }

    function test_SetAttestationWindowRounds_RaisesUnbondingFloor() public {
        coordinator.setUnbondingPeriod(10 * uint256(ROUND));
        coordinator.setAttestationWindowRounds(5);
        _expectInvalid(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", 6 * uint256(ROUND) - 1);
        _expectSet(SwarmCoordinator.setUnbondingPeriod.selector, "unbondingPeriod", 6 * uint256(ROUND));
    }

    // ---------------------------------------------------------------- slashBps

    function test_SetSlashBps_Boundaries() public {
        _expectSet(SwarmCoordinator.setSlashBps.selector, "slashBps", 0);
        _expectSet(SwarmCoordinator.setSlashBps.selector, "slashBps", 10_000);
        _expectInvalid(SwarmCoordinator.setSlashBps.selector, "slashBps", 10_001);
        assertEq(coordinator.parameters().slashBps, 10_000, "slashBps");
    }

    function testFuzz_SetSlashBps(uint256 value) public {
        if (value > 10_000) {
            _expectInvalid(SwarmCoordinator.setSlashBps.selector, "slashBps", value);
        } else {
            _expectSet(SwarmCoordinator.setSlashBps.selector, "slashBps", value);
            assertEq(coordinator.parameters().slashBps, value, "slashBps");
        }
    }

    // ---------------------------------------------------------------- disputeQuorum

    function test_SetDisputeQuorum_Boundaries() public {
        _expectInvalid(SwarmCoordinator.setDisputeQuorum.selector, "disputeQuorum", 0);
        _expectSet(SwarmCoordinator.setDisputeQuorum.selector, "disputeQuorum", 1);
        _expectSet(SwarmCoordinator.setDisputeQuorum.selector, "disputeQuorum", type(uint16).max);
        _expectInvalid(SwarmCoordinator.setDisputeQuorum.selector, "disputeQuorum", uint256(type(uint16).max) + 1);
        assertEq(coordinator.parameters().disputeQuorum, type(uint16).max, "disputeQuorum");
    }

    function testFuzz_SetDisputeQuorum(uint256 value) public {
        if (value == 0 || value > type(uint16).max) {
            _expectInvalid(SwarmCoordinator.setDisputeQuorum.selector, "disputeQuorum", value);
        } else {
            _expectSet(SwarmCoordinator.setDisputeQuorum.selector, "disputeQuorum", value);
            assertEq(coordinator.parameters().disputeQuorum, value, "disputeQuorum");
        }
    }

    // ---------------------------------------------------------------- treasury

    function test_SetTreasury_ChangesAndEmits() public {
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit TreasuryChanged(stranger);
        coordinator.setTreasury(stranger);
        assertEq(coordinator.treasury(), stranger, "treasury");
    }

    function test_SetTreasury_RevertsOnZeroAddress() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorZeroAddress.selector));
        coordinator.setTreasury(address(0));
    }

    // ---------------------------------------------------------------- pause

    function test_Pause_AndUnpauseEmitAndToggle() public {
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit Paused(owner);
        coordinator.pause();
        assertTrue(coordinator.paused(), "paused");
        assertTrue(coordinator.parameters().paused, "parameters().paused");

        vm.expectEmit(true, true, true, true, address(coordinator));
        emit Unpaused(owner);
        coordinator.unpause();
        assertFalse(coordinator.paused(), "unpaused");
    }

    function test_Pause_RevertsWhenPaused() public {
        coordinator.pause();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorPaused.selector));
        coordinator.pause();
    }

    function test_Unpause_RevertsWhenNotPaused() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotPaused.selector));
        coordinator.unpause();
    }

    function test_Pause_KeepsParametersAndLeavesExitsOpen() public {
        _register(alice, 2 ether);
        coordinator.pause();
        // Owner settings still work while paused and do not unpause.
        coordinator.setSlashBps(250);
        assertTrue(coordinator.paused(), "still paused");
        assertEq(coordinator.parameters().slashBps, 250, "slashBps");
        _exit(alice);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(alice);
        coordinator.withdraw();
        assertEq(alice.balance, 2 ether, "withdrawn while paused");
    }

    // ---------------------------------------------------------------- two-step ownership

    function test_TransferOwnership_StartsAndEmits() public {
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit OwnershipTransferStarted(owner, newOwner);
        coordinator.transferOwnership(newOwner);
        assertEq(coordinator.pendingOwner(), newOwner, "pending");
        assertEq(coordinator.owner(), owner, "owner unchanged until accepted");
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotOwner.selector, newOwner));
        vm.prank(newOwner);
        coordinator.pause();
    }

    function test_AcceptOwnership_CompletesTransfer() public {
        coordinator.transferOwnership(newOwner);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit OwnershipTransferred(owner, newOwner);
        vm.prank(newOwner);
        coordinator.acceptOwnership();
        assertEq(coordinator.owner(), newOwner, "owner");
        assertEq(coordinator.pendingOwner(), address(0), "pending cleared");
        assertEq(coordinator.treasury(), owner, "treasury is separate");

        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotOwner.selector, owner));
        coordinator.pause();
        vm.prank(newOwner);
        coordinator.pause();
        assertTrue(coordinator.paused(), "new owner in charge");
    }

    function test_AcceptOwnership_RevertsForOthers() public {
        coordinator.transferOwnership(newOwner);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotPendingOwner.selector, stranger));
        vm.prank(stranger);
        coordinator.acceptOwnership();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotPendingOwner.selector, owner));
        coordinator.acceptOwnership();
    }

    function test_AcceptOwnership_RevertsWithoutPendingTransfer() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotPendingOwner.selector, newOwner));
        vm.prank(newOwner);
        coordinator.acceptOwnership();
    }

    function test_TransferOwnership_CanBeRedirectedOrCancelled() public {
        coordinator.transferOwnership(newOwner);
        coordinator.transferOwnership(stranger);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotPendingOwner.selector, newOwner));
        vm.prank(newOwner);
        coordinator.acceptOwnership();

        vm.expectEmit(true, true, true, true, address(coordinator));
        emit OwnershipTransferStarted(owner, address(0));
        coordinator.transferOwnership(address(0));
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotPendingOwner.selector, stranger));
        vm.prank(stranger);
        coordinator.acceptOwnership();
        assertEq(coordinator.owner(), owner, "owner kept");
    }

    function test_AcceptOwnership_OnlyOnce() public {
        coordinator.transferOwnership(newOwner);
        vm.prank(newOwner);
        coordinator.acceptOwnership();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotPendingOwner.selector, newOwner));
        vm.prank(newOwner);
        coordinator.acceptOwnership();
    }

    // ---------------------------------------------------------------- helpers

    function _expectSet(bytes4 selector, bytes32 name, uint256 value) private {
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit ParametersChanged(name, value);
        (bool ok, bytes memory reason) = address(coordinator).call(abi.encodeWithSelector(selector, value));
        if (!ok) {
            assembly {
                revert(add(reason, 32), mload(reason))
            }
        }
    }

    function _expectInvalid(bytes4 selector, bytes32 name, uint256 value) private {
        Parameters memory before = coordinator.parameters();
        (bool ok, bytes memory reason) = address(coordinator).call(abi.encodeWithSelector(selector, value));
        assertFalse(ok, "setter must revert");
        assertEq(
            keccak256(reason),
            keccak256(abi.encodeWithSelector(SwarmCoordinatorInvalidParameter.selector, name, value)),
            "InvalidParameter(name, value)"
        );
        assertEq(keccak256(abi.encode(coordinator.parameters())), keccak256(abi.encode(before)), "parameters unchanged");
    }
}
