// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice attest: batches, ordering, windows, digests, counts, tallies and open disputes.
contract AttestTest is CoordinatorTest {
    address[5] internal peers;

    /// @dev Five peers; everyone published in rounds 2 and 3; the chain is in round 3.
    function setUp() public override {
        super.setUp();
        peers = [alice, bob, carol, dave, erin];
        for (uint256 i = 0; i < peers.length; ++i) {
            _register(peers[i]);
        }
        _warpToRound(2);
        for (uint256 i = 0; i < peers.length; ++i) {
            _publish(peers[i], 2);
        }
        _warpToRound(3);
        for (uint256 i = 0; i < peers.length; ++i) {
            _publish(peers[i], 3);
        }
    }

    // ---------------------------------------------------------------- batches

    function test_Attest_BatchOfSeveralSubjectsEmitsAndTallies() public {
        Attestation[] memory items = new Attestation[](4);
        items[0] = _agree(3, bob);
        items[1] = _flag(3, carol);
        items[2] = _item(3, dave, 10, 10);
        items[3] = _item(3, erin, 10, 0);
        items = _sort(items);
        for (uint256 i = 0; i < items.length; ++i) {
            Attestation memory item = items[i];
            vm.expectEmit(true, true, true, true, address(coordinator));
            emit Attested(
                item.round, item.subject, alice, item.digest, item.checked, item.agreed, item.verifiedRewardSum
            );
        }
        vm.prank(alice);
        coordinator.attest(items);

        _assertVerdict(3, bob, 0, 1);
        _assertVerdict(3, carol, 1, 0);
        _assertVerdict(3, dave, 0, 1);
        _assertVerdict(3, erin, 1, 0);
        assertEq(_peer(alice).nextAttestRound, 4, "attester moves to the next round");
        assertEq(_peer(bob).openDisputes, 0, "agreement opens nothing");
        assertEq(_peer(carol).openDisputes, 1, "flag opens a dispute");
        assertEq(_peer(erin).openDisputes, 1, "flag opens a dispute");
    }

    function test_Attest_BatchMaySpanRounds() public {
        // Sorted by round first: the subject order restarts in the next round.
        Attestation[] memory byRound = new Attestation[](4);
        byRound[0] = _agree(2, bob);
        byRound[1] = _agree(2, carol);
        byRound[2] = _agree(3, bob);
        byRound[3] = _agree(3, carol);
        byRound = _sort(byRound);
        vm.prank(alice);
        coordinator.attest(byRound);
        _assertVerdict(2, bob, 0, 1);
        _assertVerdict(3, carol, 0, 1);
        assertEq(_peer(alice).nextAttestRound, 4, "next round");
    }

    function test_Attest_NextRoundAfterAnEarlierBatch() public {
        _attest(alice, _agree(2, bob));
        assertEq(_peer(alice).nextAttestRound, 3, "after round 2");
        _attest(alice, _agree(3, bob));
        assertEq(_peer(alice).nextAttestRound, 4, "after round 3");
    }

    function test_Attest_AcceptsExitingSubject() public {
        _exit(bob);
        _attest(alice, _flag(3, bob));
        assertEq(_peer(bob).openDisputes, 1, "an exiting peer's batch can still be disputed");
    }

    // ---------------------------------------------------------------- counts: flag or agreement

    function testFuzz_Attest_FlagWhenFewerAgreedThanChecked(uint32 checked, uint32 agreed) public {
        checked = uint32(bound(checked, 1, type(uint32).max));
        agreed = uint32(bound(agreed, 0, checked));
        _attest(alice, _item(3, bob, checked, agreed));
        bool flag = agreed < checked;
        _assertVerdict(3, bob, flag ? 1 : 0, flag ? 0 : 1);
        assertEq(_peer(bob).openDisputes, flag ? 1 : 0, "openDisputes");
    }

    function test_Attest_RevertsOnZeroChecked() public {
        _expectAttestRevert(
            alice, _item(3, bob, 0, 0), abi.encodeWithSelector(SwarmCoordinatorInvalidCounts.selector, 0, 0)
        );
    }

    function test_Attest_RevertsOnAgreedAboveChecked() public {
        _expectAttestRevert(
            alice, _item(3, bob, 3, 4), abi.encodeWithSelector(SwarmCoordinatorInvalidCounts.selector, 3, 4)
        );
    }

    function testFuzz_Attest_RevertsOnInvalidCounts(uint32 checked, uint32 agreed) public {
        vm.assume(checked == 0 || agreed > checked);
        _expectAttestRevert(
            alice,
            _item(3, bob, checked, agreed),
            abi.encodeWithSelector(SwarmCoordinatorInvalidCounts.selector, checked, agreed)
        );
    }

    // ---------------------------------------------------------------- tallies and open disputes

    function test_Attest_TalliesFlagsAndAgreementsAcrossAttesters() public {
        _attest(alice, _flag(3, bob));
        _attest(carol, _flag(3, bob));
        _attest(dave, _agree(3, bob));
        _assertVerdict(3, bob, 2, 1);
        assertFalse(coordinator.verdict(3, bob).settled, "not settled");
    }

    function test_Attest_OpenDisputesCountsFlaggedRoundsOnce() public {
        _attest(alice, _flag(2, bob));
        assertEq(_peer(bob).openDisputes, 1, "first flag of round 2");
        _attest(carol, _flag(2, bob));
        _attest(dave, _flag(2, bob));
        assertEq(_peer(bob).openDisputes, 1, "more flags on round 2 change nothing");
        _attest(alice, _flag(3, bob));
        assertEq(_peer(bob).openDisputes, 2, "round 3 is a second dispute");
        _attest(erin, _agree(3, carol));
        assertEq(_peer(carol).openDisputes, 0, "agreements never open disputes");
    }

    function test_Attest_AgreementsBeforeAFlagThenOneDispute() public {
        _attest(alice, _agree(3, bob));
        _attest(carol, _agree(3, bob));
        assertEq(_peer(bob).openDisputes, 0, "agreements only");
        _attest(dave, _flag(3, bob));
        assertEq(_peer(bob).openDisputes, 1, "first flag opens the dispute");
        _assertVerdict(3, bob, 1, 2);
    }

    // ---------------------------------------------------------------- rejections

    function test_Attest_RevertsOnSelfAttestation() public {
        Attestation[] memory items = new Attestation[](2);
        items[0] = _agree(3, alice);
        items[1] = _agree(3, bob);
        items = _sort(items);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorSelfAttestation.selector));
        vm.prank(alice);
        coordinator.attest(items);
    }

    function test_Attest_RevertsOnEmptyBatch() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorEmptyAttestation.selector));
        vm.prank(alice);
        coordinator.attest(new Attestation[](0));
    }

    function test_Attest_RevertsOnSubjectsOutOfOrder() public {
        Attestation[] memory items = _sort(_pair(_agree(3, bob), _agree(3, carol)));
        (items[0], items[1]) = (items[1], items[0]);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAttestationOutOfOrder.selector, 3, items[1].subject));
        vm.prank(alice);
        coordinator.attest(items);
    }

    function test_Attest_RevertsOnDuplicateSubject() public {
        Attestation[] memory items = _pair(_agree(3, bob), _flag(3, bob));
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAttestationOutOfOrder.selector, 3, bob));
        vm.prank(alice);
        coordinator.attest(items);
    }

    function test_Attest_RevertsOnRoundsOutOfOrder() public {
        Attestation[] memory items = _pair(_agree(3, bob), _agree(2, carol));
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAttestationOutOfOrder.selector, 2, carol));
        vm.prank(alice);
        coordinator.attest(items);
    }

    function test_Attest_RevertsOnSecondBatchForAnAttestedRound() public {
        _attest(alice, _agree(3, bob));
        _expectAttestRevert(
            alice, _agree(3, carol), abi.encodeWithSelector(SwarmCoordinatorAttestationOutOfOrder.selector, 3, carol)
        );
        _expectAttestRevert(
            alice, _agree(2, carol), abi.encodeWithSelector(SwarmCoordinatorAttestationOutOfOrder.selector, 2, carol)
        );
        _expectAttestRevert(
            alice, _flag(3, bob), abi.encodeWithSelector(SwarmCoordinatorAttestationOutOfOrder.selector, 3, bob)
        );
    }

    function test_Attest_RevertsWhenWindowClosed() public {
        _warpToRound(3 + WINDOW);
        _attest(alice, _agree(3, bob));
        _warpToRound(3 + WINDOW + 1);
        _expectAttestRevert(
            carol,
            _agree(3, bob),
            abi.encodeWithSelector(SwarmCoordinatorAttestationWindowClosed.selector, 3, 3 + WINDOW + 1)
        );
    }

    function testFuzz_Attest_OnlyWithinWindow(uint256 elapsedRounds, uint256 offset) public {
        elapsedRounds = bound(elapsedRounds, 0, 3 * uint256(WINDOW));
        offset = bound(offset, 0, ROUND - 1);
        vm.warp(uint256(coordinator.genesis()) + (3 + elapsedRounds) * ROUND + offset);
        if (elapsedRounds > WINDOW) {
            _expectAttestRevert(
                alice,
                _agree(3, bob),
                abi.encodeWithSelector(SwarmCoordinatorAttestationWindowClosed.selector, 3, 3 + elapsedRounds)
            );
        } else {
            _attest(alice, _agree(3, bob));
            _assertVerdict(3, bob, 0, 1);
        }
    }

    function test_Attest_RevertsOnHugeRoundWithNamedError() public {
        Attestation memory item = _agree(type(uint64).max, bob);
        _expectAttestRevert(
            alice, item, abi.encodeWithSelector(SwarmCoordinatorNoPublication.selector, type(uint64).max, bob)
        );
    }

    function test_Attest_RevertsWithoutPublication() public {
        _expectAttestRevert(
            alice, _agree(1, bob), abi.encodeWithSelector(SwarmCoordinatorNoPublication.selector, 1, bob)
        );
        _expectAttestRevert(
            alice, _agree(3, stranger), abi.encodeWithSelector(SwarmCoordinatorNoPublication.selector, 3, stranger)
        );
    }

    function test_Attest_RevertsOnDigestMismatch() public {
        Attestation memory item = _agree(3, bob);
        item.digest = keccak256("some other batch");
        _expectAttestRevert(
            alice, item, abi.encodeWithSelector(SwarmCoordinatorDigestMismatch.selector, _digest(bob, 3), item.digest)
        );
    }

    function test_Attest_RevertsForNonPeer() public {
        _expectAttestRevert(
            stranger, _agree(3, bob), abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, stranger)
        );
    }

    function test_Attest_RevertsForExitingAttester() public {
        _exit(alice);
        _expectAttestRevert(alice, _agree(3, bob), abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, alice));
    }

    function test_Attest_RevertsWhenPaused() public {
        coordinator.pause();
        _expectAttestRevert(alice, _agree(3, bob), abi.encodeWithSelector(SwarmCoordinatorPaused.selector));
    }

    function test_Attest_RevertedBatchRecordsNothing() public {
        Attestation[] memory items = new Attestation[](3);
        items[0] = _flag(3, bob);
        items[1] = _flag(3, carol);
        items[2] = _item(3, dave, 0, 0);
        items = _sort(items);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidCounts.selector, 0, 0));
        vm.prank(alice);
        coordinator.attest(items);
        _assertVerdict(3, bob, 0, 0);
        _assertVerdict(3, carol, 0, 0);
        assertEq(_peer(bob).openDisputes, 0, "no dispute");
        assertEq(_peer(alice).nextAttestRound, 0, "attester unchanged");
    }

    // ---------------------------------------------------------------- helpers

    function _pair(Attestation memory a, Attestation memory b) private pure returns (Attestation[] memory items) {
        items = new Attestation[](2);
        items[0] = a;
        items[1] = b;
    }

    function _expectAttestRevert(address attester, Attestation memory item, bytes memory error) private {
        Attestation[] memory items = _one(item);
        vm.expectRevert(error);
        vm.prank(attester);
        coordinator.attest(items);
    }

    function _assertVerdict(uint64 round, address subject, uint256 flags, uint256 agreements) private view {
        Verdict memory v = coordinator.verdict(round, subject);
        assertEq(v.flags, flags, "flags");
        assertEq(v.agreements, agreements, "agreements");
    }
}
