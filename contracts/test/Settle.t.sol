// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice settle, resolveFlag, reportAgreement, claim.
contract SettleTest is CoordinatorTest {
    function setUp() public override {
        super.setUp();
        _register(alice);
        _register(bob);
        _register(carol);
        _register(dave);
        _warpToRound(R);
        _publish(dave, R);
    }

    /// @dev alice and bob flag dave (2 of the 3 other ether), carol agrees.
    function _upheldCase() private {
        address[] memory attesters = new address[](3);
        attesters[0] = alice;
        attesters[1] = bob;
        attesters[2] = carol;
        I.VerdictItem[][] memory items = new I.VerdictItem[][](3);
        items[0] = _one(_flag(dave));
        items[1] = _one(_flag(dave));
        items[2] = _one(_agree(dave));
        _judge(R, attesters, items);
    }

    function test_SettleUpheld() public {
        _upheldCase();
        _warpToRound(_settleable(R));
        uint256 slash = 0.1 ether;
        uint256 tip = slash * TIP_BPS / 10_000;
        vm.expectEmit(address(coordinator));
        emit I.DisputeSettled(R, dave, I.VerdictState.Upheld, slash, 2 ether, 1 ether, stranger, tip);
        vm.prank(stranger);
        coordinator.settle(R, dave);
        assertEq(_peer(dave).stake, 0.9 ether, "slashed");
        assertEq(_peer(dave).openDisputes, 0, "dispute closed");
        assertEq(coordinator.claimable(stranger), tip, "tip");
        uint256 pool = slash * REWARD_BPS / 10_000;
        assertEq(coordinator.rewardPool(R, dave), pool, "pool");
        assertEq(coordinator.burned(), slash - tip - pool, "burned");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadySettled.selector, R, dave));
        coordinator.settle(R, dave);

        coordinator.resolveFlag(R, dave, alice);
        coordinator.resolveFlag(R, dave, bob);
        assertEq(coordinator.claimable(alice), pool / 2, "alice's share");
        assertEq(coordinator.claimable(bob), pool / 2, "bob's share");
        assertEq(_peer(alice).lockedBonds, 0, "bond unlocked");
        assertEq(_peer(alice).stake, 1 ether, "bond kept");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNoFlag.selector, R, dave, alice));
        coordinator.resolveFlag(R, dave, alice);
        vm.prank(alice);
        coordinator.claim();
        assertEq(alice.balance, pool / 2 + COMMIT_DEPOSIT, "claimed (and the commit deposit back)");
    }

    function test_SettleRejectedWhenAgreementsOutweigh() public {
        address[] memory attesters = new address[](3);
        (attesters[0], attesters[1], attesters[2]) = (alice, bob, carol);
        I.VerdictItem[][] memory items = new I.VerdictItem[][](3);
        (items[0], items[1], items[2]) = (_one(_flag(dave)), _one(_agree(dave)), _one(_agree(dave)));
        _judge(R, attesters, items);
        _settle(R, dave);
        assertTrue(coordinator.verdict(R, dave).state == I.VerdictState.Rejected, "2 ether of agreements vs 1");
        assertEq(_peer(dave).stake, 1 ether, "not slashed");
        vm.expectEmit(address(coordinator));
        emit I.FlagResolved(R, dave, alice, false, FLAG_BOND);
        coordinator.resolveFlag(R, dave, alice);
        assertEq(_peer(alice).stake, 1 ether - FLAG_BOND, "bond forfeited");
        assertEq(coordinator.claimable(dave), FLAG_BOND, "to the subject");
    }

    /// @dev A tie is no proof either way: nobody is slashed, the flag's bond comes back, the batch verifies nothing.
    function test_TieIsInconclusive() public {
        _judge2(R, alice, _flag(dave), bob, _agree(dave));
        vm.expectEmit(address(coordinator));
        emit I.DisputeSettled(R, dave, I.VerdictState.Inconclusive, 0, 1 ether, 1 ether, stranger, 0);
        _settle(R, dave);
        assertEq(_peer(dave).stake, 1 ether, "not slashed");
        vm.expectEmit(address(coordinator));
        emit I.FlagResolved(R, dave, alice, false, 0);
        coordinator.resolveFlag(R, dave, alice);
        assertEq(_peer(alice).stake, 1 ether, "bond kept");
        assertEq(_peer(alice).lockedBonds, 0, "and unlocked");
        assertEq(coordinator.claimable(dave), 0, "nothing to the subject");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadySettled.selector, R, dave));
        coordinator.settle(R, dave);
    }

    function test_SettleRules() public {
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, R, R + J + 1, type(uint64).max));
        coordinator.settle(R, dave);
        _warpToRound(_settleable(R));
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNoDispute.selector, R, dave));
        coordinator.settle(R, dave);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNoDispute.selector, R, alice));
        coordinator.settle(R, alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotSettled.selector, R, dave));
        coordinator.resolveFlag(R, dave, alice);
    }

    function test_SettleWorksWhilePaused() public {
        _upheldCase();
        coordinator.pause();
        _settle(R, dave);
        coordinator.resolveFlag(R, dave, alice);
        vm.prank(stranger);
        coordinator.claim();
    }

    function test_LastResolvedFlagBurnsTheDust() public {
        // Three flaggers with equal weight share a pool not divisible by three.
        _register(erin);
        _warpToRound(R + 1);
        _publish(dave, R + 1);
        address[] memory attesters = new address[](3);
        attesters[0] = alice;
        attesters[1] = bob;
        attesters[2] = erin;
        I.VerdictItem[][] memory items = new I.VerdictItem[][](3);
        for (uint256 i = 0; i < 3; ++i) {
            items[i] = _one(_flag(dave));
        }
        _judge(R + 1, attesters, items);
        _settle(R + 1, dave);
        uint256 pool = coordinator.rewardPool(R + 1, dave);
        uint256 burnedBefore = coordinator.burned();
        for (uint256 i = 0; i < 3; ++i) {
            coordinator.resolveFlag(R + 1, dave, attesters[i]);
        }
        uint256 paid = 3 * (pool / 3);
        assertEq(coordinator.burned() - burnedBefore, pool - paid, "dust burned");
    }

    function test_ReportAgreement() public {
        _upheldCase();
        _settle(R, dave);
        I.VerdictItem[] memory revealed = _one(_agree(dave));
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotPenalizable.selector, R, dave, carol));
        coordinator.reportAgreement(R, carol, revealed, 0);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotPenalizable.selector, R, address(0), carol));
        coordinator.reportAgreement(R, carol, revealed, 1);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotPenalizable.selector, R, dave, carol));
        coordinator.reportAgreement(R, carol, _one(_item(dave, 8, 7)), 0);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotPenalizable.selector, R, dave, alice));
        coordinator.reportAgreement(R, alice, _one(_flag(dave)), 0);

        uint256 share = uint256(FLAG_BOND) * TIP_BPS / 10_000;
        uint256 before = coordinator.claimable(stranger); // its settle tip
        vm.expectEmit(address(coordinator));
        emit I.AgreementPenalized(R, dave, carol, stranger, FLAG_BOND, share);
        vm.prank(stranger);
        coordinator.reportAgreement(R, carol, revealed, 0);
        assertEq(_peer(carol).stake, 1 ether - FLAG_BOND, "penalized");
        assertEq(coordinator.claimable(stranger) - before, share, "reporter");
    }

    function test_ReportAgreementNeedsAnUpheldVerdict() public {
        _judge2(R, alice, _flag(dave), bob, _agree(dave));
        _settle(R, dave);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotPenalizable.selector, R, dave, bob));
        coordinator.reportAgreement(R, bob, _one(_agree(dave)), 0);
    }

    /// @dev A flagger slashed below its locked bonds forfeits what is left, never more.
    /// @dev Finding 10 of the v2 review: 12 flags in one reveal locked only 10 bonds, capped by free stake. Now a
    /// flag counts only with its whole bond; the ones the attester cannot cover are ignored.
    function test_EveryCountedFlagIsFullyBonded() public {
        I.Rules memory rules = defaultRules();
        rules.flagBond = 0.4 ether;
        uint64 from = coordinator.scheduleParameters(MIN_STAKE, rules);
        _warpToRound(from);
        _publish(bob, from);
        _publish(carol, from);
        _publish(dave, from);
        I.VerdictItem[] memory items = new I.VerdictItem[](3);
        (items[0], items[1], items[2]) = (_flag(bob), _flag(carol), _flag(dave));
        _sort(items);
        address[] memory attesters = new address[](1);
        attesters[0] = alice;
        I.VerdictItem[][] memory all = new I.VerdictItem[][](1);
        all[0] = items;
        _judge(from, attesters, all);
        assertEq(_peer(alice).lockedBonds, 0.8 ether, "two whole bonds, no partial third");
        assertEq(_peer(alice).openFlags, 2, "two flags counted");
        assertEq(coordinator.verdict(from, items[2].subject).flaggers, 0, "the third flag was not cast");
    }
}
