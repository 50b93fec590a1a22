// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice Issue 13's findings, each replayed against protocol v2: every attack fails for the attacker.
contract AttacksTest is CoordinatorTest {
    address internal victim;
    address internal agreer;
    address[3] internal sybils;

    // ---------------------------------------------------------------- (a) minimum-stake sybils

    function _sybilSetUp() private {
        victim = alice;
        agreer = bob;
        _register(victim, 1 ether);
        _register(agreer, 1 ether);
        for (uint256 i = 0; i < 3; ++i) {
            sybils[i] = _labelled(0x5B10 + i, "sybil");
            _register(sybils[i], MIN_STAKE);
        }
        _warpToRound(R);
        _publish(victim, R);
        _warpToRound(_commitPhase(R));
    }

    /// @dev Chooses a prevrandao under which all three sybils sit on the victim's committee: the best case an
    /// attacker who could steer the beacon would get.
    function _sealWithAllSybilsSeated() private {
        uint256 total = 2 ether + 3 * uint256(MIN_STAKE);
        for (uint256 x = 1; x < 2_000; ++x) {
            bytes20 beacon = _beacon(bytes32(x), R);
            bool all = true;
            for (uint256 i = 0; i < 3 && all; ++i) {
                all = _voteWeight(beacon, total, COMMITTEE, victim, sybils[i], MIN_STAKE) != 0;
            }
            if (all) {
                _sealWith(R, bytes32(x));
                assertEq(coordinator.seal(R).totalWeight, total, "sealed total weight");
                return;
            }
        }
        revert("no prevrandao seats all three sybils");
    }

    function test_SybilsCannotSlashAnHonestPeer() public {
        _sybilSetUp();
        _sealWithAllSybilsSeated();
        for (uint256 i = 0; i < 3; ++i) {
            (bool seated, uint256 weight) = coordinator.committeeSeat(R, victim, sybils[i]);
            assertTrue(seated, "sybil seated");
            assertEq(weight, (2 ether + 3 * uint256(MIN_STAKE)) / COMMITTEE, "a drawn seat weighs T / k");
            _commit(sybils[i], R, _one(_flag(victim)));
        }
        _commit(agreer, R, _one(_agree(victim)));
        _warpToRound(_revealPhase(R));
        for (uint256 i = 0; i < 3; ++i) {
            _reveal(sybils[i], R, _one(_flag(victim)));
        }
        _reveal(agreer, R, _one(_agree(victim)));

        _settle(R, victim);
        assertTrue(coordinator.verdict(R, victim).state == I.VerdictState.Rejected, "rejected");
        assertEq(_peer(victim).stake, 1 ether, "victim not slashed");
        for (uint256 i = 0; i < 3; ++i) {
            coordinator.resolveFlag(R, victim, sybils[i]);
            assertEq(_peer(sybils[i]).stake, MIN_STAKE - FLAG_BOND, "sybil forfeited its bond");
        }
        assertEq(coordinator.claimable(victim), 3 * uint256(FLAG_BOND), "victim got the bonds");
        vm.prank(victim);
        coordinator.claim();
        assertEq(victim.balance, 3 * uint256(FLAG_BOND), "victim claimed");
    }

    /// @dev Without the honest agreement the sybils still fail: their weight misses the floor of the total and the
    /// subject's own weight. Nothing outweighs them either, so the dispute is inconclusive: no slash, no bond lost.
    function test_SybilsAloneMissTheFloor() public {
        _sybilSetUp();
        _sealWithAllSybilsSeated();
        for (uint256 i = 0; i < 3; ++i) {
            _commit(sybils[i], R, _one(_flag(victim)));
        }
        _warpToRound(_revealPhase(R));
        for (uint256 i = 0; i < 3; ++i) {
            _reveal(sybils[i], R, _one(_flag(victim)));
        }
        _settle(R, victim);
        assertTrue(coordinator.verdict(R, victim).state == I.VerdictState.Inconclusive, "inconclusive");
        assertEq(_peer(victim).stake, 1 ether, "victim not slashed");
        coordinator.resolveFlag(R, victim, sybils[0]);
        assertEq(_peer(sybils[0]).stake, MIN_STAKE, "bond returned");
        assertEq(_peer(sybils[0]).lockedBonds, 0, "unlocked");
    }

    // ---------------------------------------------------------------- (b) sock puppet

    function test_SockPuppetDoesNotShieldACheater() public {
        address cheater = erin;
        address puppet = _labelled(0x9099, "puppet");
        _register(cheater);
        _register(puppet, MIN_STAKE);
        _register(alice);
        _register(bob);
        _warpToRound(R);
        _publish(cheater, R);
        _warpToRound(_commitPhase(R));
        _seal(R);
        _commit(puppet, R, _one(_agree(cheater)));
        _commit(alice, R, _one(_flag(cheater)));
        _commit(bob, R, _one(_flag(cheater)));
        _warpToRound(_revealPhase(R));
        _reveal(puppet, R, _one(_agree(cheater)));
        _reveal(alice, R, _one(_flag(cheater)));
        _reveal(bob, R, _one(_flag(cheater)));

        _settle(R, cheater);
        assertTrue(coordinator.verdict(R, cheater).state == I.VerdictState.Upheld, "upheld");
        assertEq(_peer(cheater).stake, 0.9 ether, "cheater slashed 10%");

        vm.prank(carol);
        coordinator.reportAgreement(R, puppet, _one(_agree(cheater)), 0);
        assertEq(_peer(puppet).stake, MIN_STAKE - FLAG_BOND, "puppet penalized one flag bond");
        assertEq(coordinator.claimable(carol), uint256(FLAG_BOND) * TIP_BPS / 10_000, "reporter's share");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotPenalizable.selector, R, cheater, puppet));
        vm.prank(carol);
        coordinator.reportAgreement(R, puppet, _one(_agree(cheater)), 0);
    }

    // ---------------------------------------------------------------- (c) owner cannot lock stake

    function test_OwnerCannotLockAStake() public {
        _register(alice);
        _register(bob);
        _register(carol);
        _register(erin);
        _warpToRound(R);
        _publish(erin, R);
        _exit(erin);
        _judge1(R, alice, _flag(erin)); // 1 of 3 other ether: under the floor, nothing against it: inconclusive
        coordinator.pause();
        I.Rules memory harsh = defaultRules();
        harsh.slashBps = 10_000;
        harsh.floorBps = 0;
        coordinator.scheduleParameters(type(uint96).max, harsh);

        _warpToRound(_settleable(R));
        vm.prank(erin);
        coordinator.settle(R, erin);
        assertTrue(coordinator.verdict(R, erin).state == I.VerdictState.Inconclusive, "not upheld under R's rules");
        coordinator.resolveFlag(R, erin, alice);
        assertEq(_peer(alice).stake, 1 ether, "alice's bond back");
        _warpToRound(R + BONDED);
        vm.prank(erin);
        coordinator.withdraw();
        assertEq(erin.balance, 1 ether, "whole stake back while paused");
        assertTrue(coordinator.paused(), "still paused");
    }

    // ---------------------------------------------------------------- (d) signature after a chain reset

    function test_SignatureBeforeAChainResetIsRefused() public {
        uint256 snapshot = vm.snapshotState();
        SwarmCoordinator first = _deploy(SEED_INPUT);
        coordinator = first;
        _register(alice);
        _warpToRound(R);
        bytes memory sig = _signPublish(ALICE_KEY, alice, R, address(0), type(uint64).max);
        uint256 again = vm.snapshotState();
        _publishFor(sponsor, alice, R, address(0), type(uint64).max, sig);
        vm.revertToState(again);

        vm.revertToState(snapshot);
        vm.warp(START + 7); // the reset chain's deployment block comes at another time
        coordinator = _deploy(SEED_INPUT);
        assertEq(address(coordinator), address(first), "same address: same deployer and nonce");
        _register(alice);
        _warpToRound(R);
        vm.expectRevert(I.SwarmCoordinatorInvalidSignature.selector);
        _publishFor(sponsor, alice, R, address(0), type(uint64).max, sig);
    }

    /// @dev Finding 10 of the v2 review: a redeploy with the same seed input at the same timestamp got the same
    /// genesis seed, so old signatures replayed. The parent block's hash now enters it: a chain whose history
    /// differs gets another seed even at the same address, time and input.
    function test_SameInputAndTimeOnAnotherHistoryGetsAnotherSeed() public {
        uint256 snapshot = vm.snapshotState();
        vm.setBlockhash(block.number - 1, keccak256("history A"));
        bytes32 first = _deploy(SEED_INPUT).genesisSeed();
        vm.revertToState(snapshot);
        vm.setBlockhash(block.number - 1, keccak256("history B"));
        SwarmCoordinator second = _deploy(SEED_INPUT);
        assertEq(second.genesis(), START, "same time");
        assertTrue(second.genesisSeed() != first, "another seed");
    }

    function test_SignatureForAnotherSeedInputIsRefused() public {
        uint256 snapshot = vm.snapshotState();
        coordinator = _deploy(SEED_INPUT);
        address first = address(coordinator);
        _register(alice);
        _warpToRound(R);
        bytes memory sig = _signPublish(ALICE_KEY, alice, R, address(0), type(uint64).max);
        vm.revertToState(snapshot);
        coordinator = _deploy(keccak256("another network"));
        assertEq(address(coordinator), first, "same address");
        _register(alice);
        _warpToRound(R);
        vm.expectRevert(I.SwarmCoordinatorInvalidSignature.selector);
        _publishFor(sponsor, alice, R, address(0), type(uint64).max, sig);
    }

    // ---------------------------------------------------------------- (e) late publication

    function test_LatePublicationIsJudgedAndSettled() public {
        _register(alice);
        _register(bob);
        _register(carol);
        _register(dave);
        _warpToRound(R + GRACE); // the last round the batch of R is accepted
        _publish(dave, R);
        _judge2(R, alice, _flag(dave), bob, _flag(dave));
        I.Verdict memory v = coordinator.verdict(R, dave);
        assertEq(v.flaggers, 2, "two flags counted");
        _settle(R, dave);
        assertTrue(coordinator.verdict(R, dave).state == I.VerdictState.Upheld, "settled, upheld");
        assertEq(_peer(dave).stake, 0.9 ether, "slashed");
    }

    // ---------------------------------------------------------------- (f) windows and rules cannot move

    function test_RulesOfAStartedRoundNeverChange() public {
        _register(alice);
        _register(bob);
        _register(carol);
        _warpToRound(R);
        _publish(carol, R);
        I.Rules memory lenient = defaultRules();
        lenient.slashBps = 1;
        lenient.quorumBps = 9_999;
        uint64 fromRound = coordinator.scheduleParameters(MIN_STAKE, lenient);
        assertEq(fromRound, R + J + 1, "new rules from current + J + 1");
        assertEq(coordinator.rulesAt(R).slashBps, SLASH_BPS, "round R keeps its rules");
        _judge2(R, alice, _flag(carol), bob, _flag(carol));
        _settle(R, carol); // R + J + 1: the new rules are in force now, but not for R
        assertEq(coordinator.rulesAt(coordinator.currentRound()).slashBps, 1, "new rules in force");
        assertEq(_peer(carol).stake, 0.9 ether, "slashed under R's rules");
        assertEq(coordinator.graceRounds(), GRACE, "grace fixed");
        assertEq(coordinator.commitRounds(), COMMIT, "commit fixed");
        assertEq(coordinator.revealRounds(), REVEAL, "reveal fixed");
    }
}
