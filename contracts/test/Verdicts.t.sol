// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice sealRound, commitVerdicts, revealVerdicts (seat rule, VerdictIgnored), with fuzzed seats and tallies.
contract VerdictsTest is CoordinatorTest {
    function setUp() public override {
        super.setUp();
        _register(alice);
        _register(bob);
        _register(carol);
        _warpToRound(R);
        _publish(alice, R);
        _publish(bob, R);
    }

    // ---------------------------------------------------------------- seal

    function test_SealPhaseAndValue() public {
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, R, R + 2, R + 3));
        coordinator.sealRound(R);
        _warpToRound(_commitPhase(R));
        uint256 fixedBlock = block.number;
        vm.expectEmit(address(coordinator));
        emit I.RoundArmed(R, fixedBlock);
        coordinator.sealRound(R);
        assertEq(coordinator.beaconBlock(R), fixedBlock, "beacon block");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorBeaconPending.selector, R, fixedBlock));
        coordinator.sealRound(R);
        vm.setBlockhash(fixedBlock, BLOCKHASH);
        vm.roll(fixedBlock + 1);
        bytes20 beacon = _beacon(BLOCKHASH, R);
        vm.expectEmit(address(coordinator));
        emit I.RoundSealed(R, beacon, 3 ether);
        vm.prank(stranger);
        coordinator.sealRound(R);
        I.Seal memory s = coordinator.seal(R);
        assertEq(bytes32(s.beacon), bytes32(beacon), "beacon");
        assertEq(s.totalWeight, 3 ether, "total weight");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadySealed.selector, R));
        coordinator.sealRound(R);
        _warpToRound(R + GRACE + COMMIT + 1);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, R - 1, R + 1, R + 2));
        coordinator.sealRound(R - 1);
    }

    /// @dev Finding 3 of the v2 review: a contract sealed only in blocks whose prevrandao seated its sybils. Now
    /// the beacon is the hash of the arming call's own block, unknown to that call, and every completing call,
    /// whoever sends it and in whichever later block, draws the same beacon.
    function test_BeaconDoesNotDependOnWhoCompletesOrWhen() public {
        _warpToRound(_commitPhase(R));
        coordinator.sealRound(R);
        uint256 fixedBlock = block.number;
        vm.setBlockhash(fixedBlock, BLOCKHASH);
        uint256 snapshot = vm.snapshotState();
        bytes20[3] memory drawn;
        for (uint256 i = 0; i < 3; ++i) {
            vm.revertToState(snapshot);
            vm.roll(fixedBlock + 1 + i * 100);
            vm.prevrandao(bytes32(i + 7));
            vm.prank(i == 0 ? stranger : alice);
            coordinator.sealRound(R);
            drawn[i] = coordinator.seal(R).beacon;
        }
        assertEq(bytes32(drawn[0]), bytes32(_beacon(BLOCKHASH, R)), "beacon from the beacon block's hash");
        assertEq(bytes32(drawn[1]), bytes32(drawn[0]), "another caller, 100 blocks later");
        assertEq(bytes32(drawn[2]), bytes32(drawn[0]), "200 blocks later, another prevrandao");
    }

    /// @dev When nobody completed the seal within 256 blocks the hash is gone: the next call fixes a new block.
    function test_StaleBeaconBlockIsReplaced() public {
        _warpToRound(_commitPhase(R));
        coordinator.sealRound(R);
        uint256 first = block.number;
        vm.roll(first + 257);
        vm.expectEmit(address(coordinator));
        emit I.RoundArmed(R, first + 257);
        coordinator.sealRound(R);
        assertEq(coordinator.seal(R).beacon, bytes20(0), "not drawn from a lost hash");
        vm.setBlockhash(first + 257, BLOCKHASH);
        vm.roll(first + 258);
        coordinator.sealRound(R);
        assertEq(bytes32(coordinator.seal(R).beacon), bytes32(_beacon(BLOCKHASH, R)), "drawn from the new block");
    }

    function test_SealExcludesStakeAddedAfterTheRound() public {
        vm.deal(dave, 5 ether);
        vm.prank(dave);
        coordinator.register{value: 5 ether}("late");
        _warpToRound(_commitPhase(R));
        _seal(R);
        assertEq(coordinator.seal(R).totalWeight, 3 ether, "dave's deposit of round R does not count for R");
    }

    // ---------------------------------------------------------------- commit

    function test_CommitRules() public {
        vm.deal(carol, 1 ether);
        vm.deal(stranger, 1 ether);
        bytes32 c = _commitment(carol, R, _one(_agree(alice)), SALT);
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, R, R + 2, R + 3));
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(R, c);
        _warpToRound(_commitPhase(R));
        vm.prank(carol);
        vm.expectRevert(I.SwarmCoordinatorZeroCommitment.selector);
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(R, bytes32(0));
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotActive.selector, stranger));
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(R, c);
        vm.expectEmit(address(coordinator));
        emit I.VerdictsCommitted(R, carol);
        vm.prank(carol);
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(R, c);
        assertEq(coordinator.ballot(R, carol), c, "ballot");
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadyCommitted.selector, R, carol));
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(R, c);
    }

    function test_ExitingPeerCommitsOnlyUpToItsExitRound() public {
        _exit(carol); // exit round R
        _warpToRound(_commitPhase(R) + 1); // R+3: in R's commit phase and R+1's
        _commit(carol, R, _one(_agree(alice)));
        bytes32 c = _commitment(carol, R + 1, _none(), SALT);
        vm.deal(carol, 1 ether);
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotActive.selector, carol));
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(R + 1, c);
    }

    // ---------------------------------------------------------------- reveal

    function _committed(address attester, I.VerdictItem[] memory items) private {
        _warpToRound(_commitPhase(R));
        _seal(R);
        _commit(attester, R, items);
        _warpToRound(_revealPhase(R));
    }

    function test_RevealCountsSeatedVerdicts() public {
        I.VerdictItem[] memory items = _two(_agree(alice), _flag(bob));
        _committed(carol, items);
        vm.expectEmit(address(coordinator));
        emit I.VerdictRevealed(R, alice, carol, 8, 8, 8_000, 1 ether);
        _reveal(carol, R, items);
        I.Verdict memory a = coordinator.verdict(R, alice);
        assertEq(a.agreeWeight, 1 ether, "agree weight");
        assertEq(a.agreers, 1, "agreers");
        I.Verdict memory b = coordinator.verdict(R, bob);
        assertEq(b.flagWeight, 1 ether, "flag weight");
        assertEq(b.flaggers, 1, "flaggers");
        assertEq(coordinator.flagWeight(R, bob, carol), 1 ether, "flag record");
        assertEq(_peer(carol).lockedBonds, FLAG_BOND, "bond locked");
        assertEq(_peer(carol).openFlags, 1, "open flag");
        assertEq(_peer(bob).openDisputes, 1, "dispute opened");
        assertEq(coordinator.ballot(R, carol), _receipt(items), "receipt");
    }

    function test_RevealRejectsASecondRevealAndWrongSalt() public {
        I.VerdictItem[] memory items = _one(_agree(alice));
        _committed(carol, items);
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorCommitmentMismatch.selector, R, carol));
        coordinator.revealVerdicts(R, items, bytes32(0));
        _reveal(carol, R, items);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorCommitmentMismatch.selector, R, carol));
        _reveal(carol, R, items);
    }

    function test_RevealPhaseAndSeal() public {
        I.VerdictItem[] memory items = _one(_agree(alice));
        _warpToRound(_commitPhase(R));
        _commit(carol, R, items);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, R, R + 4, R + 5));
        _reveal(carol, R, items);
        _warpToRound(_revealPhase(R));
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotSealed.selector, R));
        _reveal(carol, R, items);
    }

    function test_RevealItemChecks() public {
        _checkItems(_two(_agree(alice), _agree(alice)), abi.encodeWithSelector(I.SwarmCoordinatorAttestationOutOfOrder.selector, alice));
    }

    function test_RevealRejectsSelf() public {
        _checkItems(_one(_agree(carol)), abi.encodeWithSelector(I.SwarmCoordinatorSelfAttestation.selector));
    }

    function test_RevealRejectsUnpublished() public {
        _checkItems(_one(_agree(dave)), abi.encodeWithSelector(I.SwarmCoordinatorNoPublication.selector, R, dave));
    }

    function test_RevealRejectsBadCounts() public {
        _checkItems(_one(_item(alice, 0, 0)), abi.encodeWithSelector(I.SwarmCoordinatorInvalidCounts.selector, 0, 0));
    }

    function _checkItems(I.VerdictItem[] memory items, bytes memory expected) private {
        _committed(carol, items);
        vm.expectRevert(expected);
        _reveal(carol, R, items);
    }

    function test_EmptyRevealIsValid() public {
        _committed(carol, _none());
        _reveal(carol, R, _none());
        assertEq(coordinator.ballot(R, carol), _receipt(_none()), "receipt");
    }

    /// @dev An attester without a seat (no weight in R) may commit and reveal; its items do not count.
    function test_UnseatedItemIsIgnored() public {
        _warpToRound(_commitPhase(R));
        _seal(R);
        // dave registered in R's commit phase has no weight in R: never seated.
        _register(dave);
        _commit(dave, R, _one(_flag(alice)));
        _warpToRound(_revealPhase(R));
        vm.expectEmit(address(coordinator));
        emit I.VerdictIgnored(R, alice, dave, 8, 5, 5_000);
        _reveal(dave, R, _one(_flag(alice)));
        assertEq(coordinator.verdict(R, alice).flaggers, 0, "not counted");
        assertEq(_peer(dave).openFlags, 0, "no bond locked");
        assertEq(_peer(alice).openDisputes, 0, "no dispute");
    }

    // ---------------------------------------------------------------- fuzz: the seat rule and tallies

    /// @dev A seated attester's vote weight is its stake when k * w >= T, else T / k, and committeeSeat matches
    /// the rule computed here bit for bit.
    function testFuzz_SeatRule(uint96 stake, uint256 randao) public {
        uint256 w = bound(stake, MIN_STAKE, 100 ether);
        vm.deal(dave, w);
        vm.prank(dave);
        coordinator.register{value: w}("dave");
        _warpToRound(R + 1);
        _publish(alice, R + 1);
        _warpToRound(_commitPhase(R + 1));
        _sealWith(R + 1, bytes32(randao | 1));
        I.Seal memory s = coordinator.seal(R + 1);
        assertEq(s.totalWeight, 3 ether + w, "T");
        (bool seated, uint256 weight) = coordinator.committeeSeat(R + 1, alice, dave);
        uint256 expected = _voteWeight(s.beacon, s.totalWeight, COMMITTEE, alice, dave, w);
        assertEq(weight, expected, "rule");
        assertEq(seated, expected != 0, "seated");
        if (COMMITTEE * w >= s.totalWeight) assertEq(weight, w, "fully seated with its stake");
        else if (seated) assertEq(weight, s.totalWeight / COMMITTEE, "drawn seat weighs T / k");
    }

    /// @dev Tallies are the sums of the revealed seats' weights, flags and agreements apart.
    function testFuzz_Tallies(uint256 flagMask, uint256 voteMask, uint256 randao) public {
        address[5] memory voters;
        for (uint256 i = 0; i < 5; ++i) {
            voters[i] = _labelled(0xF000 + i, "voter");
            _register(voters[i], MIN_STAKE * (1 + i * 7));
        }
        _warpToRound(R + 1);
        _publish(alice, R + 1);
        _warpToRound(_commitPhase(R + 1));
        _sealWith(R + 1, bytes32(randao | 1));
        uint256 flags;
        uint256 agrees;
        for (uint256 i = 0; i < 5; ++i) {
            if ((voteMask >> i) & 1 == 0) continue;
            bool isFlag = (flagMask >> i) & 1 == 1;
            _commit(voters[i], R + 1, _one(isFlag ? _flag(alice) : _agree(alice)));
            (, uint256 w) = coordinator.committeeSeat(R + 1, alice, voters[i]);
            if (isFlag) flags += w;
            else agrees += w;
        }
        _warpToRound(_revealPhase(R + 1));
        for (uint256 i = 0; i < 5; ++i) {
            if ((voteMask >> i) & 1 == 0) continue;
            _reveal(voters[i], R + 1, _one((flagMask >> i) & 1 == 1 ? _flag(alice) : _agree(alice)));
        }
        I.Verdict memory v = coordinator.verdict(R + 1, alice);
        assertEq(v.flagWeight, flags, "flag weight");
        assertEq(v.agreeWeight, agrees, "agree weight");
    }
}
