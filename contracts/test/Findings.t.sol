// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice The attacks of the v2 review (docs/PROTOCOL.md, "Attack costs"), each played against v3 and failing for
/// the attacker. Beacon grinding, quorum ranges and partly bonded flags are in Verdicts, Admin and Settle.
contract FindingsTest is CoordinatorTest {
    /// @dev Finding 1: a sybil seated as a withheld batch's only voter revealed 10^12, or 2^63 - 1, as its reward
    /// sum. A reveal is now refused above n * G * 1000 (8 * 8 * 1000 here), and below zero.
    function test_RevealedRewardSumIsCappedByTheBatchShape() public {
        _register(alice);
        _register(bob);
        _warpToRound(R);
        _publish(bob, R);
        int64[4] memory bad = [int64(64_001), int64(1e12), type(int64).max, int64(-1)];
        uint256 snapshot = vm.snapshotState();
        for (uint256 i = 0; i < bad.length; ++i) {
            vm.revertToState(snapshot);
            I.VerdictItem memory item = _agree(bob);
            item.verifiedRewardSum = bad[i];
            _warpToRound(_commitPhase(R));
            _seal(R);
            _commit(alice, R, _one(item));
            _warpToRound(_revealPhase(R));
            vm.expectRevert(
                abi.encodeWithSelector(I.SwarmCoordinatorRewardOutOfRange.selector, bad[i], int256(64_000))
            );
            _reveal(alice, R, _one(item));
        }
        vm.revertToState(snapshot);
        I.VerdictItem memory full = _item(bob, 64, 64);
        full.verifiedRewardSum = 64_000;
        _judge1(R, alice, full);
        assertEq(coordinator.verdict(R, bob).agreers, 1, "the maximum itself is accepted");
    }

    function test_CheckedCountIsCappedByTheBatchShape() public {
        _register(alice);
        _register(bob);
        _warpToRound(R);
        _publish(bob, R);
        I.VerdictItem memory item = _item(bob, 65, 0);
        _warpToRound(_commitPhase(R));
        _seal(R);
        _commit(alice, R, _one(item));
        _warpToRound(_revealPhase(R));
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidCounts.selector, 65, 0));
        _reveal(alice, R, _one(item));
    }

    /// @dev Finding 4: a cheater's puppet asked to exit in round r, agreed, and withdrew in r + J + 1 before the
    /// dispute was settled, so `reportAgreement` failed. Its stake now stays until r + 2J + 1.
    function test_ExitCannotDodgeTheAgreementPenalty() public {
        address cheater = erin;
        address puppet = _labelled(0x9099, "puppet");
        _register(cheater);
        _register(puppet, MIN_STAKE);
        _register(alice);
        _register(bob);
        _warpToRound(R);
        _publish(cheater, R);
        _exit(puppet);
        address[] memory attesters = new address[](3);
        (attesters[0], attesters[1], attesters[2]) = (puppet, alice, bob);
        I.VerdictItem[][] memory items = new I.VerdictItem[][](3);
        (items[0], items[1], items[2]) = (_one(_agree(cheater)), _one(_flag(cheater)), _one(_flag(cheater)));
        _judge(R, attesters, items);
        _warpToRound(_settleable(R));
        vm.prank(puppet);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorStillBonded.selector, R + BONDED));
        coordinator.withdraw();
        _warpToRound(R + BONDED - 1);
        coordinator.settle(R, cheater);
        vm.prank(carol);
        coordinator.reportAgreement(R, puppet, _one(_agree(cheater)), 0);
        assertEq(_peer(puppet).stake, MIN_STAKE - FLAG_BOND, "the puppet paid for its agreement");
        _warpToRound(R + BONDED);
        vm.prank(puppet);
        coordinator.withdraw();
        assertEq(puppet.balance, MIN_STAKE - FLAG_BOND + COMMIT_DEPOSIT, "the rest, and its deposit back");
    }

    /// @dev Finding 5: a 10-ETH deposit made during the round, or a 10-ETH peer that asked to exit, inflated the
    /// seal's T, and three honest flags missed the floor. T now counts only weight that may judge the round.
    function test_TotalWeightCountsOnlyWeightThatMayJudge() public {
        address whale = _labelled(0x3A1E, "whale");
        address cheater = erin;
        _register(alice);
        _register(bob);
        _register(carol);
        _register(cheater);
        _register(whale, 10 ether);
        _warpToRound(R - 1);
        _exit(whale); // judges R - 1, not R
        _warpToRound(R);
        _publish(cheater, R);
        address lateWhale = _labelled(0x3A1F, "late whale");
        _register(lateWhale, 10 ether); // deposited in R: counts from R + 1
        _warpToRound(R + 1);
        vm.deal(alice, 5 ether);
        vm.prank(alice);
        coordinator.addStake{value: 5 ether}(); // merges nothing into R
        address[] memory attesters = new address[](3);
        (attesters[0], attesters[1], attesters[2]) = (alice, bob, carol);
        I.VerdictItem[][] memory items = new I.VerdictItem[][](3);
        (items[0], items[1], items[2]) = (_one(_flag(cheater)), _one(_flag(cheater)), _one(_flag(cheater)));
        _judge(R, attesters, items);
        assertEq(coordinator.seal(R).totalWeight, 4 ether, "T: the four 1-ETH peers of round R");
        _settle(R, cheater);
        assertTrue(coordinator.verdict(R, cheater).state == I.VerdictState.Upheld, "the honest flags win");
        assertEq(_peer(cheater).stake, 0.9 ether, "slashed");
    }

    /// @dev The seal's T equals the sum of `weightAt` over every peer, through deposits, exits and slashes.
    function testFuzz_TotalIsTheSumOfWeights(uint96[4] memory stakes, uint8 exits, uint8 deposits) public {
        address[4] memory peers = [alice, bob, carol, dave];
        for (uint256 i = 0; i < 4; ++i) {
            _register(peers[i], bound(stakes[i], MIN_STAKE, 50 ether));
        }
        _register(erin);
        for (uint64 round = R - 2; round <= R + 1; ++round) {
            _warpToRound(round);
            if (round == R) _publish(erin, R);
            uint256 i = (uint256(exits) + round) % 4;
            if ((exits >> (round + 2 - R)) & 1 == 1 && _peer(peers[i]).status == I.PeerStatus.Active) {
                _exit(peers[i]);
            }
            uint256 j = (uint256(deposits) + round) % 4;
            if ((deposits >> (round + 2 - R)) & 1 == 1 && _peer(peers[j]).status == I.PeerStatus.Active) {
                vm.deal(peers[j], 1 ether);
                vm.prank(peers[j]);
                coordinator.addStake{value: 1 ether}();
            }
        }
        _warpToRound(_commitPhase(R));
        _seal(R);
        uint256 sum = coordinator.weightAt(erin, R);
        for (uint256 i = 0; i < 4; ++i) {
            sum += coordinator.weightAt(peers[i], R);
        }
        assertEq(coordinator.seal(R).totalWeight, sum, "T = the sum of the weights");
    }

    /// @dev Finding 8: in a young swarm one seated 0.01-ETH sybil cleared quorum and floor against the only other
    /// peer. The subject floor needs flags of at least the subject's own weight.
    function test_SmallIdentityCannotSlashALoneHonestPeer() public {
        address victim = alice;
        address sybil = _labelled(0x5B10, "sybil");
        _register(victim);
        _register(sybil, MIN_STAKE);
        _warpToRound(R);
        _publish(victim, R);
        _judge1(R, sybil, _flag(victim));
        (bool seated,) = coordinator.committeeSeat(R, victim, sybil);
        if (!seated) return; // nothing counted: nothing to prove (the draw is fixed by the test's block hash)
        _settle(R, victim);
        assertTrue(coordinator.verdict(R, victim).state == I.VerdictState.Inconclusive, "not upheld");
        assertEq(_peer(victim).stake, 1 ether, "victim keeps its stake");
    }

    /// @dev Finding 9: an honest 1-ETH node flagged invalid batches against a third of ~70 ETH of mostly idle
    /// weight, lost all 35 disputes and 35 bonds. A flag that misses the floor and is not outweighed is now
    /// inconclusive: the bond comes back.
    function test_HonestFlagBelowTheFloorKeepsItsBond() public {
        address idle = _labelled(0x1D1E, "idle");
        _register(alice);
        _register(erin);
        _register(idle, 60 ether);
        _warpToRound(R);
        _publish(erin, R);
        _judge1(R, alice, _flag(erin));
        _settle(R, erin);
        assertTrue(coordinator.verdict(R, erin).state == I.VerdictState.Inconclusive, "inconclusive");
        coordinator.resolveFlag(R, erin, alice);
        assertEq(_peer(alice).stake, 1 ether, "the correct flag cost nothing");
        assertEq(coordinator.claimable(erin), 0, "and paid the cheater nothing");
    }

    /// @dev Finding 10: a batch of round F - 1 published in its grace round F was refused when minStake rose from
    /// F. The minimum of the batch's own round applies.
    function test_PublicationUsesTheMinimumOfItsOwnRound() public {
        _register(alice, MIN_STAKE);
        _warpToRound(R);
        uint64 from = coordinator.scheduleParameters(1 ether, defaultRules());
        _warpToRound(from);
        _publish(alice, from - 1);
        assertTrue(coordinator.verdict(from - 1, alice).state == I.VerdictState.Published, "late batch accepted");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInsufficientStake.selector, MIN_STAKE, 1 ether));
        _publish(alice, from);
    }

    /// @dev Finding 10: a committed ballot never revealed cost nothing, a free option to watch the honest reveals
    /// first. Every commitment now carries the commit deposit, which only its reveal sends back.
    function test_AnUnrevealedBallotCostsItsDeposit() public {
        _register(alice);
        _register(bob);
        _register(carol);
        _warpToRound(R);
        _publish(bob, R);
        _warpToRound(_commitPhase(R));
        _seal(R);
        bytes32 c = _commitment(alice, R, _one(_agree(bob)), SALT);
        vm.deal(alice, 1 ether);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongDeposit.selector, 0, COMMIT_DEPOSIT));
        coordinator.commitVerdicts(R, c);
        vm.prank(alice);
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(R, c);
        _commit(carol, R, _one(_flag(bob)));
        assertEq(alice.balance, 1 ether - COMMIT_DEPOSIT, "alice paid the deposit");
        uint256 held = address(coordinator).balance;
        _warpToRound(_revealPhase(R));
        uint256 before = carol.balance;
        _reveal(carol, R, _one(_flag(bob)));
        assertEq(carol.balance - before, COMMIT_DEPOSIT, "the reveal sends the deposit back");
        _warpToRound(_settleable(R)); // alice never revealed
        assertEq(alice.balance, 1 ether - COMMIT_DEPOSIT, "alice's deposit is gone");
        assertEq(address(coordinator).balance, held - COMMIT_DEPOSIT, "and stays in the contract");
    }
}
