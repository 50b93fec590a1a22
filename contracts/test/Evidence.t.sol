// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {EvidenceExtension} from "../src/EvidenceExtension.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice postEvidence (the coordinator's EvidenceExtension): who may post where a batch fails its provenance
/// recompute, and when.
contract EvidenceTest is CoordinatorTest {
    uint256 private constant _M = 3; // RECOMPUTING_SEATS
    EvidenceExtension private evidence;

    function setUp() public override {
        super.setUp();
        _register(alice);
        _register(bob);
        _register(carol);
        _warpToRound(R);
        _publish(alice, R);
        _publish(bob, R);
        evidence = EvidenceExtension(address(coordinator));
    }

    /// @dev The recompute draw of docs/PROTOCOL.md ("Who recomputes"), written out independently.
    function _recomputes(address subject, address poster) private view returns (bool) {
        bytes20 beacon = coordinator.seal(R).beacon;
        uint256 draw = uint256(keccak256(abi.encodePacked("swarm.provenance/seat/1", beacon, subject, poster)));
        return draw < (type(uint256).max / COMMITTEE) * _M;
    }

    /// @dev Seals R with the first beacon-block hash for which `poster`'s recompute draw on `subject` is `wanted`
    /// (each peer holds a third of the weight, so at k = 64 it sits on every committee).
    function _sealWhere(address subject, address poster, bool wanted) private {
        _warpToRound(_commitPhase(R));
        for (uint256 i = 0; i < 1000; ++i) {
            uint256 snapshot = vm.snapshotState();
            _sealWith(R, keccak256(abi.encode("beacon", i)));
            if (_recomputes(subject, poster) == wanted) return;
            vm.revertToState(snapshot);
        }
        revert("no beacon found");
    }

    function _post(address poster, address subject, uint32 group, uint32 completion) private {
        vm.prank(poster);
        evidence.postEvidence(R, subject, group, completion, 5);
    }

    function test_RecomputingSeatPostsOnce() public {
        _sealWhere(alice, carol, true);
        vm.expectEmit(address(coordinator));
        emit I.ProvenanceEvidence(R, alice, carol, 3, 7, 5);
        _post(carol, alice, 3, 7);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadyPosted.selector, R, alice, carol));
        _post(carol, alice, 0, 0);
    }

    function test_SeatThatDoesNotRecomputeCannotPost() public {
        _sealWhere(alice, carol, false);
        (bool seated,) = coordinator.committeeSeat(R, alice, carol);
        assertTrue(seated, "carol sits on alice's committee");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotRecomputing.selector, R, alice, carol));
        _post(carol, alice, 0, 0);
    }

    function test_RecomputesMatchesTheDraw() public {
        _sealWhere(alice, carol, true);
        assertTrue(evidence.recomputes(R, alice, carol), "carol recomputes alice");
        assertFalse(evidence.recomputes(R, alice, alice), "nobody recomputes its own batch");
        assertFalse(evidence.recomputes(R, alice, stranger), "a stranger has no seat");
        assertEq(evidence.recomputes(R, bob, carol), _recomputes(bob, carol), "carol on bob");
    }

    function test_TheExtensionCalledDirectlyReverts() public {
        _sealWhere(alice, carol, true);
        EvidenceExtension direct = new EvidenceExtension();
        vm.prank(carol);
        vm.expectRevert();
        direct.postEvidence(R, alice, 0, 0, 0);
    }

    function test_UnknownSelectorAndEtherRevert() public {
        (bool ok,) = address(coordinator).call(abi.encodeWithSignature("nothing()"));
        assertFalse(ok, "unknown selector");
        vm.deal(stranger, 1 ether);
        vm.prank(stranger);
        (ok,) = address(coordinator).call{value: 1}("");
        assertFalse(ok, "plain ether");
    }

    function test_StrangerCannotPost() public {
        _sealWhere(alice, carol, true);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotRecomputing.selector, R, alice, stranger));
        _post(stranger, alice, 0, 0);
    }

    function test_EvidenceChecks() public {
        _sealWhere(alice, carol, true);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotRecomputing.selector, R, alice, alice));
        _post(alice, alice, 0, 0); // nobody sits on its own committee
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNoPublication.selector, R, carol));
        _post(bob, carol, 0, 0);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidEvidence.selector, TASKS, 0));
        _post(carol, alice, TASKS, 0);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInvalidEvidence.selector, 0, GROUP));
        _post(carol, alice, 0, GROUP);
    }

    function test_EvidenceOnlyInTheCommitPhaseOfASealedRound() public {
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, R, R + 2, R + 3));
        _post(carol, alice, 0, 0);
        _warpToRound(_commitPhase(R));
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotRecomputing.selector, R, alice, carol));
        _post(carol, alice, 0, 0); // no seats before the seal
        _sealWhere(alice, carol, true);
        _warpToRound(_revealPhase(R));
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongPhase.selector, R, R + 2, R + 3));
        _post(carol, alice, 0, 0);
    }

    function test_EveryoneRecomputesWhenTheCommitteeIsNoLargerThanM() public {
        I.Rules memory rules = defaultRules();
        rules.committeeSize = uint16(_M);
        coordinator.scheduleParameters(MIN_STAKE, rules);
        uint64 from = coordinator.rulesAt(coordinator.currentRound() + J + 1).fromRound;
        _warpToRound(from);
        _publish(alice, from);
        _warpToRound(from + GRACE + 1);
        _sealWith(from, BLOCKHASH);
        vm.prank(carol);
        evidence.postEvidence(from, alice, 0, 0, 0);
        vm.prank(bob);
        evidence.postEvidence(from, alice, 0, 0, 0);
    }
}
