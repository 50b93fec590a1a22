// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice publishRollouts and publishRolloutsFor (relayer, deadline, salted domain).
contract PublishTest is CoordinatorTest {
    uint64 internal constant FAR = type(uint64).max;

    function setUp() public override {
        super.setUp();
        _register(alice);
        _warpToRound(R);
    }

    function test_PublishOpensTheVerdictSlot() public {
        bytes32 digest = _digest(alice, R);
        vm.expectEmit(address(coordinator));
        emit I.RolloutsPublished(R, alice, digest, 8, 64, 41_250, address(0));
        _publish(alice, R);
        assertTrue(coordinator.verdict(R, alice).state == I.VerdictState.Published, "published");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadyPublished.selector, R, alice));
        _publish(alice, R);
    }

    function test_PublishWindow() public {
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongRound.selector, R + 1, R));
        _publish(alice, R + 1);
        _publish(alice, R - GRACE);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongRound.selector, R - GRACE - 1, R));
        _publish(alice, R - GRACE - 1);
    }

    function test_PublishRejects() public {
        vm.prank(alice);
        vm.expectRevert(I.SwarmCoordinatorZeroDigest.selector);
        coordinator.publishRollouts(R, bytes32(0), 1, 1, 1);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorNotActive.selector, bob));
        _publish(bob, R);
        coordinator.pause();
        vm.expectRevert(I.SwarmCoordinatorPaused.selector);
        _publish(alice, R);
    }

    function test_PublishNeedsTheMinimumStakeInForce() public {
        I.Rules memory rules = defaultRules();
        uint64 from = coordinator.scheduleParameters(2 ether, rules);
        _publish(alice, R);
        assertEq(coordinator.minStake(), MIN_STAKE, "old minimum until the change");
        _warpToRound(from);
        assertEq(coordinator.minStake(), 2 ether, "new minimum");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorInsufficientStake.selector, 1 ether, 2 ether));
        _publish(alice, from);
    }

    function test_RelayedPublication() public {
        bytes memory sig = _signPublish(ALICE_KEY, alice, R, sponsor, FAR);
        vm.expectEmit(address(coordinator));
        emit I.RolloutsPublished(R, alice, _digest(alice, R), 8, 64, 41_250, sponsor);
        _publishFor(sponsor, alice, R, sponsor, FAR, sig);
        assertTrue(coordinator.verdict(R, alice).state == I.VerdictState.Published, "published");
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorAlreadyPublished.selector, R, alice));
        _publishFor(sponsor, alice, R, sponsor, FAR, sig);
    }

    function test_RelayedByAnyoneWhenRelayerIsZero() public {
        bytes memory sig = _signPublish(ALICE_KEY, alice, R, address(0), FAR);
        _publishFor(stranger, alice, R, address(0), FAR, sig);
    }

    function test_RelayedRejectsAFrontRunner() public {
        bytes memory sig = _signPublish(ALICE_KEY, alice, R, sponsor, FAR);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorWrongRelayer.selector, sponsor));
        _publishFor(stranger, alice, R, sponsor, FAR, sig);
        // Naming itself as relayer does not help: the signature covers the relayer.
        vm.expectRevert(I.SwarmCoordinatorInvalidSignature.selector);
        _publishFor(stranger, alice, R, stranger, FAR, sig);
    }

    function test_RelayedDeadline() public {
        uint64 deadline = uint64(block.timestamp);
        bytes memory sig = _signPublish(ALICE_KEY, alice, R, address(0), deadline);
        vm.warp(block.timestamp + 1);
        vm.expectRevert(abi.encodeWithSelector(I.SwarmCoordinatorSignatureExpired.selector, deadline));
        _publishFor(sponsor, alice, R, address(0), deadline, sig);
        vm.warp(block.timestamp - 1);
        _publishFor(sponsor, alice, R, address(0), deadline, sig);
    }

    function test_RelayedRejectsBadSignatures() public {
        bytes memory bobs = _signPublish(BOB_KEY, alice, R, address(0), FAR);
        vm.expectRevert(I.SwarmCoordinatorInvalidSignature.selector);
        _publishFor(sponsor, alice, R, address(0), FAR, bobs);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(ALICE_KEY, _publishHash(alice, R, _digest(alice, R), address(0), FAR));
        bytes memory twin = abi.encodePacked(r, bytes32(SECP256K1_N - uint256(s)), v ^ 1);
        vm.expectRevert(I.SwarmCoordinatorInvalidSignature.selector);
        _publishFor(sponsor, alice, R, address(0), FAR, twin);
        vm.expectRevert(I.SwarmCoordinatorInvalidSignature.selector);
        _publishFor(sponsor, alice, R, address(0), FAR, abi.encodePacked(r, s));
    }

    function test_DomainSeparatorIsSaltedWithTheGenesisSeed() public {
        bytes32 seed = coordinator.genesisSeed();
        assertEq(
            seed,
            keccak256(
                abi.encode(PREVRANDAO, SEED_INPUT, block.chainid, address(coordinator), START, blockhash(99))
            ),
            "genesis seed"
        );
        assertEq(
            coordinator.domainSeparator(), _domainSeparator(block.chainid, address(coordinator), seed), "domain"
        );
        vm.chainId(999);
        assertEq(coordinator.domainSeparator(), _domainSeparator(999, address(coordinator), seed), "forked chain id");
    }
}
