// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CoordinatorTest} from "./utils/CoordinatorTest.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";

/// @dev A peer contract that refuses ether: its withdraw must revert with the transfer error.
contract RejectingPeer {
    function register(SwarmCoordinator coordinator) external payable {
        coordinator.register{value: msg.value}("rejecting");
    }

    function requestExit(SwarmCoordinator coordinator) external {
        coordinator.requestExit();
    }

    function withdraw(SwarmCoordinator coordinator) external {
        coordinator.withdraw();
    }
}

/// @dev A peer contract that re-enters withdraw when paid: the second call must find nothing to take.
contract ReentrantPeer {
    SwarmCoordinator private immutable _coordinator;
    bytes public reentryError;
    uint256 public received;

    constructor(SwarmCoordinator coordinator) {
        _coordinator = coordinator;
    }

    function register() external payable {
        _coordinator.register{value: msg.value}("reentrant");
    }

    function requestExit() external {
        _coordinator.requestExit();
    }

    function withdraw() external {
        _coordinator.withdraw();
    }

    receive() external payable {
        received += msg.value;
        try _coordinator.withdraw() {}
        catch (bytes memory reason) {
            reentryError = reason;
        }
    }
}

/// @notice register, addStake, requestExit, withdraw.
contract PeersTest is CoordinatorTest {
    // ---------------------------------------------------------------- register

    function test_Register_RecordsActivePeerAndEmits() public {
        vm.deal(alice, 3 ether);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit PeerRegistered(alice, "alice", 3 ether);
        vm.prank(alice);
        coordinator.register{value: 3 ether}("alice");

        PeerInfo memory info = _peer(alice);
        assertEq(info.stake, 3 ether, "stake");
        assertEq(uint8(info.status), uint8(PeerStatus.Active), "status");
        assertEq(info.withdrawableAt, 0, "withdrawableAt");
        assertEq(info.nextAttestRound, 0, "nextAttestRound");
        assertEq(info.openDisputes, 0, "openDisputes");
        assertEq(address(coordinator).balance, 3 ether, "balance");
    }

    function testFuzz_Register_AcceptsAnyStakeFromMinimum(uint256 stake) public {
        stake = bound(stake, MIN_STAKE, type(uint96).max);
        vm.deal(alice, stake);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit PeerRegistered(alice, "alice", stake);
        vm.prank(alice);
        coordinator.register{value: stake}("alice");
        assertEq(_peer(alice).stake, stake, "stake");
        assertEq(address(coordinator).balance, stake, "balance");
    }

    function test_Register_RevertsBelowMinStake() public {
        vm.deal(alice, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInsufficientStake.selector, MIN_STAKE - 1, MIN_STAKE));
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE - 1}("alice");
    }

    function testFuzz_Register_RevertsBelowMinStake(uint256 stake) public {
        stake = bound(stake, 0, MIN_STAKE - 1);
        vm.deal(alice, stake);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInsufficientStake.selector, stake, MIN_STAKE));
        vm.prank(alice);
        coordinator.register{value: stake}("alice");
    }

    function test_Register_RevertsAboveUint96Stake() public {
        uint256 stake = uint256(type(uint96).max) + 1;
        vm.deal(alice, stake);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidParameter.selector, bytes32("stake"), stake));
        vm.prank(alice);
        coordinator.register{value: stake}("alice");
    }

    function test_Register_RevertsOnEmptyName() public {
        vm.deal(alice, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidName.selector, 0));
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE}("");
    }

    function test_Register_RevertsOnNameOf33Bytes() public {
        vm.deal(alice, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidName.selector, 33));
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE}("abcdefghijklmnopqrstuvwxyz0123456");
    }

    function test_Register_AcceptsNamesOf1And32Bytes() public {
        _registerNamed(alice, "a");
        _registerNamed(bob, "abcdefghijklmnopqrstuvwxyz012345");
        assertEq(uint8(_peer(alice).status), uint8(PeerStatus.Active), "1 byte");
        assertEq(uint8(_peer(bob).status), uint8(PeerStatus.Active), "32 bytes");
    }

    function testFuzz_Register_NameLength(uint256 length) public {
        length = bound(length, 0, 80);
        string memory name = string(new bytes(length));
        vm.deal(alice, MIN_STAKE);
        if (length == 0 || length > 32) {
            vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidName.selector, length));
        }
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE}(name);
    }

    function test_Register_RevertsWhenAlreadyRegistered() public {
        _register(alice);
        vm.deal(alice, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAlreadyRegistered.selector, alice));
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE}("alice");
    }

    function test_Register_RevertsWhileExiting() public {
        _register(alice);
        _exit(alice);
        vm.deal(alice, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAlreadyRegistered.selector, alice));
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE}("alice");
    }

    function test_Register_RevertsAfterWithdraw() public {
        _register(alice);
        _exit(alice);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(alice);
        coordinator.withdraw();
        vm.deal(alice, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAlreadyRegistered.selector, alice));
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE}("alice again");
    }

    function test_Register_RevertsWhenPaused() public {
        coordinator.pause();
        vm.deal(alice, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorPaused.selector));
        vm.prank(alice);
        coordinator.register{value: MIN_STAKE}("alice");
    }

    // ---------------------------------------------------------------- addStake

    function test_AddStake_IncreasesStakeAndEmits() public {
        _register(alice);
        vm.deal(alice, 0.5 ether);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit StakeAdded(alice, 0.5 ether, MIN_STAKE + 0.5 ether);
        vm.prank(alice);
        coordinator.addStake{value: 0.5 ether}();
        assertEq(_peer(alice).stake, MIN_STAKE + 0.5 ether, "stake");
        assertEq(address(coordinator).balance, MIN_STAKE + 0.5 ether, "balance");
    }

    function testFuzz_AddStake_Accumulates(uint256 initial, uint256 added) public {
        initial = bound(initial, MIN_STAKE, type(uint96).max - 1);
        added = bound(added, 1, type(uint96).max - initial);
        _register(alice, initial);
        vm.deal(alice, added);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit StakeAdded(alice, added, initial + added);
        vm.prank(alice);
        coordinator.addStake{value: added}();
        assertEq(_peer(alice).stake, initial + added, "stake");
        assertEq(address(coordinator).balance, initial + added, "balance");
    }

    function test_AddStake_RevertsOnZero() public {
        _register(alice);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInsufficientStake.selector, 0, 1));
        vm.prank(alice);
        coordinator.addStake();
    }

    function test_AddStake_RevertsAboveUint96() public {
        _register(alice, type(uint96).max);
        vm.deal(alice, 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                SwarmCoordinatorInvalidParameter.selector, bytes32("stake"), uint256(type(uint96).max) + 1
            )
        );
        vm.prank(alice);
        coordinator.addStake{value: 1}();
    }

    function test_AddStake_RevertsForNonPeer() public {
        vm.deal(stranger, 1 ether);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, stranger));
        vm.prank(stranger);
        coordinator.addStake{value: 1 ether}();
    }

    function test_AddStake_RevertsWhileExiting() public {
        _register(alice);
        _exit(alice);
        vm.deal(alice, 1 ether);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, alice));
        vm.prank(alice);
        coordinator.addStake{value: 1 ether}();
    }

    function test_AddStake_RevertsWhenPaused() public {
        _register(alice);
        coordinator.pause();
        vm.deal(alice, 1 ether);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorPaused.selector));
        vm.prank(alice);
        coordinator.addStake{value: 1 ether}();
    }

    // ---------------------------------------------------------------- requestExit

    function test_RequestExit_StartsUnbondingAndEmits() public {
        _register(alice);
        vm.warp(START + 1234);
        uint64 withdrawableAt = uint64(START + 1234 + UNBONDING);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit ExitRequested(alice, withdrawableAt);
        vm.prank(alice);
        coordinator.requestExit();
        PeerInfo memory info = _peer(alice);
        assertEq(uint8(info.status), uint8(PeerStatus.Exiting), "status");
        assertEq(info.withdrawableAt, withdrawableAt, "withdrawableAt");
        assertEq(info.stake, MIN_STAKE, "stake kept while unbonding");
    }

    function test_RequestExit_RevertsForNonPeer() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, stranger));
        vm.prank(stranger);
        coordinator.requestExit();
    }

    function test_RequestExit_RevertsWhenAlreadyExiting() public {
        _register(alice);
        _exit(alice);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, alice));
        vm.prank(alice);
        coordinator.requestExit();
    }

    function test_RequestExit_WorksWhilePaused() public {
        _register(alice);
        coordinator.pause();
        _exit(alice);
        assertEq(uint8(_peer(alice).status), uint8(PeerStatus.Exiting), "status");
    }

    // ---------------------------------------------------------------- withdraw

    function test_Withdraw_PaysStakeBackAndEmits() public {
        _register(alice, 2 ether);
        _exit(alice);
        vm.warp(block.timestamp + UNBONDING);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit Withdrawn(alice, 2 ether);
        vm.prank(alice);
        coordinator.withdraw();
        PeerInfo memory info = _peer(alice);
        assertEq(uint8(info.status), uint8(PeerStatus.Withdrawn), "status");
        assertEq(info.stake, 0, "stake");
        assertEq(alice.balance, 2 ether, "paid");
        assertEq(address(coordinator).balance, 0, "coordinator balance");
    }

    function testFuzz_Withdraw_OnlyAfterUnbonding(uint256 stake, uint256 wait) public {
        stake = bound(stake, MIN_STAKE, type(uint96).max);
        wait = bound(wait, 0, 3 * uint256(UNBONDING));
        _register(alice, stake);
        _exit(alice);
        uint64 withdrawableAt = _peer(alice).withdrawableAt;
        vm.warp(block.timestamp + wait);
        if (wait < UNBONDING) {
            vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorStillUnbonding.selector, withdrawableAt));
        }
        vm.prank(alice);
        coordinator.withdraw();
        if (wait >= UNBONDING) assertEq(alice.balance, stake, "paid");
    }

    function test_Withdraw_RevertsOneSecondBeforeUnbondingEnds() public {
        _register(alice);
        _exit(alice);
        uint64 withdrawableAt = _peer(alice).withdrawableAt;
        vm.warp(withdrawableAt - 1);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorStillUnbonding.selector, withdrawableAt));
        vm.prank(alice);
        coordinator.withdraw();
        vm.warp(withdrawableAt);
        vm.prank(alice);
        coordinator.withdraw();
    }

    function test_Withdraw_RevertsForActivePeer() public {
        _register(alice);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotExiting.selector, alice));
        vm.prank(alice);
        coordinator.withdraw();
    }

    function test_Withdraw_RevertsForNonPeer() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotExiting.selector, stranger));
        vm.prank(stranger);
        coordinator.withdraw();
    }

    function test_Withdraw_RevertsTheSecondTime() public {
        _register(alice);
        _exit(alice);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(alice);
        coordinator.withdraw();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotExiting.selector, alice));
        vm.prank(alice);
        coordinator.withdraw();
    }

    function test_Withdraw_RevertsDuringOpenDisputeThenWorksAfterSettle() public {
        _register(alice);
        _register(bob);
        _register(carol);
        _publish(alice, 0);
        _attest(bob, _flag(0, alice));
        _attest(carol, _flag(0, alice));
        _exit(alice);
        vm.warp(block.timestamp + UNBONDING);

        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorOpenDisputes.selector, 1));
        vm.prank(alice);
        coordinator.withdraw();

        coordinator.settle(0, alice);
        uint256 slashed = uint256(MIN_STAKE) * SLASH_BPS / 10_000;
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit Withdrawn(alice, MIN_STAKE - slashed);
        vm.prank(alice);
        coordinator.withdraw();
        assertEq(alice.balance, MIN_STAKE - slashed, "paid the stake left after the slash");
        assertEq(address(coordinator).balance, 2 * uint256(MIN_STAKE) + slashed, "others' stake + slash");
    }

    function test_Withdraw_WorksWhilePaused() public {
        _register(alice);
        _exit(alice);
        coordinator.pause();
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(alice);
        coordinator.withdraw();
        assertEq(alice.balance, MIN_STAKE, "paid");
    }

    function test_Withdraw_RevertsWhenRecipientRejectsEther() public {
        RejectingPeer peer = new RejectingPeer();
        peer.register{value: MIN_STAKE}(coordinator);
        peer.requestExit(coordinator);
        vm.warp(block.timestamp + UNBONDING);
        vm.expectRevert(
            abi.encodeWithSelector(SwarmCoordinatorTransferFailed.selector, address(peer), uint256(MIN_STAKE))
        );
        peer.withdraw(coordinator);
        assertEq(uint8(_peer(address(peer)).status), uint8(PeerStatus.Exiting), "state rolled back");
    }

    function test_Withdraw_ReentryFindsNothingToTake() public {
        ReentrantPeer peer = new ReentrantPeer(coordinator);
        _register(alice, 5 ether);
        peer.register{value: MIN_STAKE}();
        peer.requestExit();
        vm.warp(block.timestamp + UNBONDING);
        peer.withdraw();
        assertEq(peer.received(), MIN_STAKE, "paid once");
        assertEq(
            keccak256(peer.reentryError()),
            keccak256(abi.encodeWithSelector(SwarmCoordinatorNotExiting.selector, address(peer))),
            "reentrant withdraw rejected"
        );
        assertEq(address(coordinator).balance, 5 ether, "alice's stake untouched");
    }

    // ---------------------------------------------------------------- helpers

    function _registerNamed(address peer, string memory name) private {
        vm.deal(peer, MIN_STAKE);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit PeerRegistered(peer, name, MIN_STAKE);
        vm.prank(peer);
        coordinator.register{value: MIN_STAKE}(name);
    }
}
