// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CoordinatorTest} from "./utils/CoordinatorTest.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";

/// @dev A treasury that refuses ether.
contract RejectingTreasury {
    function claim(SwarmCoordinator coordinator) external {
        coordinator.claimSlashedFunds();
    }
}

/// @notice settle and claimSlashedFunds.
contract SettleTest is CoordinatorTest {
    uint256 internal constant BOB_STAKE = 10 ether;
    address internal vault = address(0x7AB17);

    /// @dev Five peers (bob with 10 ether); bob published rounds 2 and 3; the chain is in round 3.
    function setUp() public override {
        super.setUp();
        _register(alice);
        _register(bob, BOB_STAKE);
        _register(carol);
        _register(dave);
        _register(erin);
        _warpToRound(2);
        _publish(bob, 2);
        _warpToRound(3);
        _publish(bob, 3);
        vm.label(vault, "vault");
    }

    // ---------------------------------------------------------------- settle

    function test_Settle_SlashesWhenQuorumFlagsOutnumberAgreements() public {
        _attest(alice, _flag(3, bob));
        _attest(carol, _flag(3, bob));
        _attest(dave, _agree(3, bob));
        _warpToRound(3 + WINDOW + 1);
        uint256 amount = BOB_STAKE * SLASH_BPS / 10_000;
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit DisputeSettled(3, bob, true, amount, 2, 1);
        vm.prank(stranger);
        coordinator.settle(3, bob);

        assertEq(amount, 1 ether, "10% of 10 ether");
        assertEq(_peer(bob).stake, BOB_STAKE - amount, "stake after slash");
        assertEq(_peer(bob).openDisputes, 0, "dispute closed");
        assertEq(coordinator.unclaimedSlashes(), amount, "unclaimed");
        assertTrue(coordinator.verdict(3, bob).settled, "settled");
        assertEq(address(coordinator).balance, BOB_STAKE + 4 * uint256(MIN_STAKE), "ether stays until claimed");
    }

    function test_Settle_NoSlashWhenFlagsDoNotOutnumberAgreements() public {
        _attest(alice, _flag(3, bob));
        _attest(carol, _flag(3, bob));
        _attest(dave, _agree(3, bob));
        _attest(erin, _agree(3, bob));
        _warpToRound(3 + WINDOW + 1);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit DisputeSettled(3, bob, false, 0, 2, 2);
        coordinator.settle(3, bob);
        assertEq(_peer(bob).stake, BOB_STAKE, "stake untouched");
        assertEq(_peer(bob).openDisputes, 0, "dispute closed anyway");
        assertEq(coordinator.unclaimedSlashes(), 0, "nothing slashed");
        assertTrue(coordinator.verdict(3, bob).settled, "settled");
    }

    function test_Settle_NoSlashBelowQuorum() public {
        _attest(alice, _flag(3, bob));
        _warpToRound(3 + WINDOW + 1);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit DisputeSettled(3, bob, false, 0, 1, 0);
        coordinator.settle(3, bob);
        assertEq(_peer(bob).stake, BOB_STAKE, "stake untouched");
        assertEq(_peer(bob).openDisputes, 0, "dispute closed");
    }

    function testFuzz_Settle_SlashRule(uint256 flags, uint256 agreements, uint256 quorum) public {
        flags = bound(flags, 1, 6);
        agreements = bound(agreements, 0, 6);
        quorum = bound(quorum, 1, 8);
        coordinator.setDisputeQuorum(quorum);
        for (uint256 i = 0; i < flags + agreements; ++i) {
            address attester = address(uint160(0xA000 + i));
            _register(attester);
            _attest(attester, i < flags ? _flag(3, bob) : _agree(3, bob));
        }
        _warpToRound(3 + WINDOW + 1);
        bool slashed = flags >= quorum && flags > agreements;
        uint256 amount = slashed ? BOB_STAKE * SLASH_BPS / 10_000 : 0;
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit DisputeSettled(3, bob, slashed, amount, uint32(flags), uint32(agreements));
        coordinator.settle(3, bob);
        assertEq(_peer(bob).stake, BOB_STAKE - amount, "stake");
        assertEq(coordinator.unclaimedSlashes(), amount, "unclaimed");
    }

    function testFuzz_Settle_SlashesExactShareOfStake(uint256 stake, uint256 bps) public {
        stake = bound(stake, MIN_STAKE, type(uint96).max);
        bps = bound(bps, 0, 10_000);
        coordinator.setSlashBps(bps);
        address subject = address(0xF00D);
        _register(subject, stake);
        _publish(subject, 3);
        _attest(alice, _flag(3, subject));
        _attest(carol, _flag(3, subject));
        _warpToRound(3 + WINDOW + 1);
        uint256 amount = stake * bps / 10_000;
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit DisputeSettled(3, subject, true, amount, 2, 0);
        coordinator.settle(3, subject);
        assertEq(_peer(subject).stake, stake - amount, "stake");
        assertEq(coordinator.unclaimedSlashes(), amount, "unclaimed");
    }

    function test_Settle_ZeroBpsSettlesWithoutTakingStake() public {
        coordinator.setSlashBps(0);
        _attest(alice, _flag(3, bob));
        _attest(carol, _flag(3, bob));
        _warpToRound(3 + WINDOW + 1);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit DisputeSettled(3, bob, true, 0, 2, 0);
        coordinator.settle(3, bob);
        assertEq(_peer(bob).stake, BOB_STAKE, "stake untouched");
    }

    function test_Settle_DecrementsOpenDisputesPerRound() public {
        _attest(alice, _flag(2, bob));
        _attest(carol, _flag(2, bob));
        _attest(alice, _flag(3, bob));
        assertEq(_peer(bob).openDisputes, 2, "two flagged rounds");
        _warpToRound(2 + WINDOW + 1);
        coordinator.settle(2, bob);
        assertEq(_peer(bob).openDisputes, 1, "round 2 settled");
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAttestationWindowOpen.selector, 3, 3 + WINDOW + 1));
        coordinator.settle(3, bob);
        _warpToRound(3 + WINDOW + 1);
        coordinator.settle(3, bob);
        assertEq(_peer(bob).openDisputes, 0, "round 3 settled");
        // Slashes compound on the stake left.
        uint256 first = BOB_STAKE * SLASH_BPS / 10_000;
        assertEq(_peer(bob).stake, BOB_STAKE - first, "only round 2 reached quorum");
    }

    function test_Settle_RevertsWhileWindowOpen() public {
        _attest(alice, _flag(3, bob));
        _warpToRound(3 + WINDOW);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAttestationWindowOpen.selector, 3, 3 + WINDOW + 1));
        coordinator.settle(3, bob);
    }

    function testFuzz_Settle_OnlyAfterWindow(uint256 elapsedRounds) public {
        elapsedRounds = bound(elapsedRounds, 0, 20);
        _attest(alice, _flag(3, bob));
        _warpToRound(uint64(3 + elapsedRounds));
        if (elapsedRounds <= WINDOW) {
            vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAttestationWindowOpen.selector, 3, 3 + WINDOW + 1));
        }
        coordinator.settle(3, bob);
    }

    function test_Settle_RevertsOnHugeRoundWithNamedError() public {
        vm.expectRevert(
            abi.encodeWithSelector(
                SwarmCoordinatorAttestationWindowOpen.selector, type(uint64).max, uint256(type(uint64).max) + WINDOW + 1
            )
        );
        coordinator.settle(type(uint64).max, bob);
    }

    function test_Settle_RevertsWithoutAttestations() public {
        _warpToRound(3 + WINDOW + 1);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNoDispute.selector, 3, bob));
        coordinator.settle(3, bob);
    }

    function test_Settle_RevertsWithOnlyAgreements() public {
        _attest(alice, _agree(3, bob));
        _attest(carol, _agree(3, bob));
        _warpToRound(3 + WINDOW + 1);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNoDispute.selector, 3, bob));
        coordinator.settle(3, bob);
    }

    function test_Settle_RevertsWhenAlreadySettled() public {
        _attest(alice, _flag(3, bob));
        _attest(carol, _flag(3, bob));
        _warpToRound(3 + WINDOW + 1);
        coordinator.settle(3, bob);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAlreadySettled.selector, 3, bob));
        coordinator.settle(3, bob);
        assertEq(_peer(bob).openDisputes, 0, "not decremented twice");
    }

    function test_Settle_RevertsWhenPaused() public {
        _attest(alice, _flag(3, bob));
        _warpToRound(3 + WINDOW + 1);
        coordinator.pause();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorPaused.selector));
        coordinator.settle(3, bob);
    }

    // ---------------------------------------------------------------- claimSlashedFunds

    function test_ClaimSlashedFunds_PaysTreasuryAndEmits() public {
        uint256 amount = _slashBob();
        uint256 before = address(this).balance;
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit SlashedFundsClaimed(address(this), amount);
        coordinator.claimSlashedFunds();
        assertEq(address(this).balance, before + amount, "treasury paid");
        assertEq(coordinator.unclaimedSlashes(), 0, "nothing left");
        assertEq(address(coordinator).balance, BOB_STAKE - amount + 4 * uint256(MIN_STAKE), "stakes remain");
    }

    function test_ClaimSlashedFunds_RevertsForNonTreasury() public {
        _slashBob();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotTreasury.selector, stranger));
        vm.prank(stranger);
        coordinator.claimSlashedFunds();
    }

    function test_ClaimSlashedFunds_RevertsWhenNothingToClaim() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNothingToClaim.selector));
        coordinator.claimSlashedFunds();
        _slashBob();
        coordinator.claimSlashedFunds();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNothingToClaim.selector));
        coordinator.claimSlashedFunds();
    }

    function test_ClaimSlashedFunds_FollowsTreasuryChange() public {
        uint256 amount = _slashBob();
        coordinator.setTreasury(vault);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotTreasury.selector, address(this)));
        coordinator.claimSlashedFunds();
        vm.prank(vault);
        coordinator.claimSlashedFunds();
        assertEq(vault.balance, amount, "new treasury paid");
    }

    function test_ClaimSlashedFunds_WorksWhilePaused() public {
        uint256 amount = _slashBob();
        coordinator.setTreasury(vault);
        coordinator.pause();
        vm.prank(vault);
        coordinator.claimSlashedFunds();
        assertEq(vault.balance, amount, "paid while paused");
    }

    function test_ClaimSlashedFunds_RevertsWhenTreasuryRejectsEther() public {
        uint256 amount = _slashBob();
        RejectingTreasury rejecting = new RejectingTreasury();
        coordinator.setTreasury(address(rejecting));
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorTransferFailed.selector, address(rejecting), amount));
        rejecting.claim(coordinator);
        assertEq(coordinator.unclaimedSlashes(), amount, "kept for a later claim");
    }

    // ---------------------------------------------------------------- helpers

    function _slashBob() private returns (uint256 amount) {
        _attest(alice, _flag(3, bob));
        _attest(carol, _flag(3, bob));
        _warpToRound(3 + WINDOW + 1);
        coordinator.settle(3, bob);
        amount = coordinator.unclaimedSlashes();
        assertEq(amount, BOB_STAKE * SLASH_BPS / 10_000, "slashed");
    }
}
