// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CoordinatorTest} from "./utils/CoordinatorTest.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";

/// @notice publishRollouts and its relayed, EIP-712 signed variant publishRolloutsFor.
contract PublishTest is CoordinatorTest {
    bytes32 internal constant DIGEST = keccak256("batch bytes");

    function setUp() public override {
        super.setUp();
        _register(alice);
        _warpToRound(5);
    }

    // ---------------------------------------------------------------- publishRollouts

    function test_PublishRollouts_RecordsDigestAndEmits() public {
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit RolloutsPublished(5, alice, DIGEST, 8, 64, -1_500, address(0));
        vm.prank(alice);
        coordinator.publishRollouts(5, DIGEST, 8, 64, -1_500);
        assertEq(coordinator.publication(5, alice), DIGEST, "publication");
        assertEq(coordinator.publication(4, alice), bytes32(0), "other round untouched");
        assertEq(coordinator.publication(5, bob), bytes32(0), "other peer untouched");
    }

    function testFuzz_PublishRollouts_RecordsAnyValues(
        bytes32 digest,
        uint32 groups,
        uint32 completions,
        int64 rewardSum
    ) public {
        vm.assume(digest != bytes32(0));
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit RolloutsPublished(5, alice, digest, groups, completions, rewardSum, address(0));
        vm.prank(alice);
        coordinator.publishRollouts(5, digest, groups, completions, rewardSum);
        assertEq(coordinator.publication(5, alice), digest, "publication");
    }

    function test_PublishRollouts_RevertsForUnregistered() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, bob));
        vm.prank(bob);
        coordinator.publishRollouts(5, DIGEST, 8, 64, 0);
    }

    function test_PublishRollouts_RevertsWhileExiting() public {
        _exit(alice);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, alice));
        vm.prank(alice);
        coordinator.publishRollouts(5, DIGEST, 8, 64, 0);
    }

    function test_PublishRollouts_RevertsAfterWithdraw() public {
        _exit(alice);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(alice);
        coordinator.withdraw();
        uint64 round = coordinator.currentRound();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, alice));
        vm.prank(alice);
        coordinator.publishRollouts(round, DIGEST, 8, 64, 0);
    }

    function test_PublishRollouts_RevertsForFutureRound() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorWrongRound.selector, 6, 5));
        vm.prank(alice);
        coordinator.publishRollouts(6, DIGEST, 8, 64, 0);
    }

    function test_PublishRollouts_AcceptsLateWithinGrace() public {
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit RolloutsPublished(4, alice, DIGEST, 8, 64, 0, address(0));
        vm.prank(alice);
        coordinator.publishRollouts(5 - GRACE, DIGEST, 8, 64, 0);
        assertEq(coordinator.publication(4, alice), DIGEST, "late publication kept");
    }

    function test_PublishRollouts_RevertsLateBeyondGrace() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorWrongRound.selector, 5 - GRACE - 1, 5));
        vm.prank(alice);
        coordinator.publishRollouts(5 - GRACE - 1, DIGEST, 8, 64, 0);
    }

    function testFuzz_PublishRollouts_GraceWindow(uint256 grace, uint256 lateBy, uint256 aheadBy, uint256 offset)
        public
    {
        grace = bound(grace, 0, 50);
        lateBy = bound(lateBy, 0, 70);
        aheadBy = bound(aheadBy, 1, 1_000);
        offset = bound(offset, 0, ROUND - 1);
        coordinator.setUnbondingPeriod(100 * uint256(ROUND));
        coordinator.setAttestationWindowRounds(50);
        coordinator.setGraceRounds(grace);
        _warpToRound(200);
        vm.warp(block.timestamp + offset);
        uint64 round = uint64(200 - lateBy);
        if (lateBy > grace) {
            vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorWrongRound.selector, round, 200));
        }
        vm.prank(alice);
        coordinator.publishRollouts(round, DIGEST, 8, 64, 0);

        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorWrongRound.selector, 200 + aheadBy, 200));
        vm.prank(alice);
        coordinator.publishRollouts(uint64(200 + aheadBy), DIGEST, 8, 64, 0);
    }

    function test_PublishRollouts_RevertsOnZeroDigest() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorZeroDigest.selector));
        vm.prank(alice);
        coordinator.publishRollouts(5, bytes32(0), 8, 64, 0);
    }

    function test_PublishRollouts_RevertsOnSecondPublicationOfARound() public {
        vm.prank(alice);
        coordinator.publishRollouts(5, DIGEST, 8, 64, 0);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAlreadyPublished.selector, 5, alice));
        vm.prank(alice);
        coordinator.publishRollouts(5, keccak256("another batch"), 8, 64, 0);
        // The next round is a fresh slot; the grace round before it is filled already.
        _warpToRound(6);
        vm.prank(alice);
        coordinator.publishRollouts(6, DIGEST, 8, 64, 0);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAlreadyPublished.selector, 5, alice));
        vm.prank(alice);
        coordinator.publishRollouts(5, DIGEST, 8, 64, 0);
    }

    function test_PublishRollouts_RevertsWhenStakeFellBelowMinimumBySlash() public {
        _register(bob);
        _register(carol);
        _publish(alice, 5);
        _attest(bob, _flag(5, alice));
        _attest(carol, _flag(5, alice));
        _warpToRound(5 + WINDOW + 1);
        coordinator.settle(5, alice);
        uint256 stake = MIN_STAKE - uint256(MIN_STAKE) * SLASH_BPS / 10_000;
        assertEq(_peer(alice).stake, stake, "slashed stake");

        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInsufficientStake.selector, stake, MIN_STAKE));
        vm.prank(alice);
        coordinator.publishRollouts(8, DIGEST, 8, 64, 0);

        vm.deal(alice, MIN_STAKE - stake);
        vm.prank(alice);
        coordinator.addStake{value: MIN_STAKE - stake}();
        vm.prank(alice);
        coordinator.publishRollouts(8, DIGEST, 8, 64, 0);
        assertEq(coordinator.publication(8, alice), DIGEST, "publishes again once topped up");
    }

    function test_PublishRollouts_RevertsWhenOwnerRaisedMinStake() public {
        coordinator.setMinStake(2 ether);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInsufficientStake.selector, MIN_STAKE, 2 ether));
        vm.prank(alice);
        coordinator.publishRollouts(5, DIGEST, 8, 64, 0);
    }

    function test_PublishRollouts_RevertsWhenPaused() public {
        coordinator.pause();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorPaused.selector));
        vm.prank(alice);
        coordinator.publishRollouts(5, DIGEST, 8, 64, 0);
        coordinator.unpause();
        vm.prank(alice);
        coordinator.publishRollouts(5, DIGEST, 8, 64, 0);
    }

    // ---------------------------------------------------------------- publishRolloutsFor

    function test_PublishRolloutsFor_AcceptsPeerSignatureAndRecordsRelayer() public {
        bytes memory signature = _signPublish(ALICE_KEY, alice, 5, DIGEST);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit RolloutsPublished(5, alice, DIGEST, 8, 64, 41_250, sponsor);
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 64, 41_250, signature);
        assertEq(coordinator.publication(5, alice), DIGEST, "publication");
    }

    function testFuzz_PublishRolloutsFor_AnyKeyAndValues(
        uint256 key,
        bytes32 digest,
        uint32 groups,
        uint32 completions,
        int64 rewardSum,
        address relayer
    ) public {
        key = bound(key, 1, SECP256K1_N - 1);
        vm.assume(digest != bytes32(0));
        address peer = vm.addr(key);
        vm.assume(_peer(peer).status == PeerStatus.None);
        _register(peer);
        bytes memory signature = _signature(key, _publishHash(peer, 5, digest, groups, completions, rewardSum));
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit RolloutsPublished(5, peer, digest, groups, completions, rewardSum, relayer);
        vm.prank(relayer);
        coordinator.publishRolloutsFor(peer, 5, digest, groups, completions, rewardSum, signature);
        assertEq(coordinator.publication(5, peer), digest, "publication");
    }

    function test_PublishRolloutsFor_RevertsOnSignatureFromAnotherKey() public {
        _register(bob);
        bytes memory forged = _signPublish(BOB_KEY, alice, 5, DIGEST);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 64, 41_250, forged);
    }

    function test_PublishRolloutsFor_RevertsOnWrongLength() public {
        bytes memory signature = _signPublish(ALICE_KEY, alice, 5, DIGEST);
        _expectInvalidSignature(_slice(signature, 64));
        _expectInvalidSignature(abi.encodePacked(signature, uint8(0)));
        _expectInvalidSignature("");
    }

    function test_PublishRolloutsFor_RevertsOnMalleableHighS() public {
        bytes32 hash = _publishHash(alice, 5, DIGEST, 8, 64, 41_250);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(ALICE_KEY, hash);
        bytes32 highS = bytes32(SECP256K1_N - uint256(s));
        uint8 flippedV = v == 27 ? 28 : 27;
        // The twin is a genuine signature by alice for the precompile; the contract must still refuse it.
        assertEq(ecrecover(hash, flippedV, r, highS), alice, "twin recovers alice");
        _expectInvalidSignature(abi.encodePacked(r, highS, flippedV));
    }

    function test_PublishRolloutsFor_RevertsOnBadV() public {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(ALICE_KEY, _publishHash(alice, 5, DIGEST, 8, 64, 41_250));
        _expectInvalidSignature(abi.encodePacked(r, s, v - 27));
        _expectInvalidSignature(abi.encodePacked(r, s, uint8(29)));
    }

    function test_PublishRolloutsFor_RevertsOnUnrecoverableSignature() public {
        // r = 0 is not a point: ecrecover returns the zero address.
        _expectInvalidSignature(abi.encodePacked(bytes32(0), bytes32(uint256(1)), uint8(27)));
    }

    function test_PublishRolloutsFor_RevertsOnSignatureOverDifferentValues() public {
        bytes memory signature = _signPublish(ALICE_KEY, alice, 5, DIGEST);
        vm.startPrank(sponsor);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        coordinator.publishRolloutsFor(alice, 5, keccak256("other batch"), 8, 64, 41_250, signature);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        coordinator.publishRolloutsFor(alice, 4, DIGEST, 8, 64, 41_250, signature);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 9, 64, 41_250, signature);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 63, 41_250, signature);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 64, -41_250, signature);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        coordinator.publishRolloutsFor(bob, 5, DIGEST, 8, 64, 41_250, signature);
        vm.stopPrank();
    }

    function test_PublishRolloutsFor_RevertsOnSignatureForAnotherChainOrCoordinator() public {
        SwarmCoordinator other = new SwarmCoordinator(ROUND, SEED_INPUT, defaultParams());
        bytes32 structHash = keccak256(abi.encode(coordinator.PUBLISH_TYPEHASH(), alice, 5, DIGEST, 8, 64, 41_250));
        bytes memory otherContract = _signature(
            ALICE_KEY,
            keccak256(abi.encodePacked("\x19\x01", _domainSeparator(block.chainid, address(other)), structHash))
        );
        bytes memory otherChain = _signature(
            ALICE_KEY, keccak256(abi.encodePacked("\x19\x01", _domainSeparator(1, address(coordinator)), structHash))
        );
        _expectInvalidSignature(otherContract);
        _expectInvalidSignature(otherChain);
    }

    function test_PublishRolloutsFor_ReplayIsRejected() public {
        bytes memory signature = _signPublish(ALICE_KEY, alice, 5, DIGEST);
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 64, 41_250, signature);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorAlreadyPublished.selector, 5, alice));
        vm.prank(stranger);
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 64, 41_250, signature);
    }

    function test_PublishRolloutsFor_AppliesPublishRules() public {
        // A valid signature does not lift the rules of publishRollouts: unregistered peer ...
        bytes memory bobSignature = _signPublish(BOB_KEY, bob, 5, DIGEST);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, bob));
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(bob, 5, DIGEST, 8, 64, 41_250, bobSignature);
        // ... wrong round ...
        bytes memory future = _signPublish(ALICE_KEY, alice, 6, DIGEST);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorWrongRound.selector, 6, 5));
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(alice, 6, DIGEST, 8, 64, 41_250, future);
        // ... zero digest ...
        bytes memory zero = _signPublish(ALICE_KEY, alice, 5, bytes32(0));
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorZeroDigest.selector));
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(alice, 5, bytes32(0), 8, 64, 41_250, zero);
        // ... pause.
        bytes memory signature = _signPublish(ALICE_KEY, alice, 5, DIGEST);
        coordinator.pause();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorPaused.selector));
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 64, 41_250, signature);
    }

    // ---------------------------------------------------------------- helpers

    function _expectInvalidSignature(bytes memory signature) private {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidSignature.selector));
        vm.prank(sponsor);
        coordinator.publishRolloutsFor(alice, 5, DIGEST, 8, 64, 41_250, signature);
    }

    function _slice(bytes memory data, uint256 length) private pure returns (bytes memory out) {
        out = new bytes(length);
        for (uint256 i = 0; i < length; ++i) {
            out[i] = data[i];
        }
    }
}
