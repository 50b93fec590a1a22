// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice announceEndpoint: an active peer announces its store endpoint; the event is the record.
contract EndpointTest is CoordinatorTest {
    /// @dev What a node announces: canonical JSON of its libp2p peer id and two public multiaddrs.
    bytes internal constant ENDPOINT = bytes(
        '{"addrs":["/ip4/93.184.216.34/tcp/4001","/ip4/93.184.216.34/udp/4001/quic-v1"],'
        '"peer_id":"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"}'
    );

    function _announce(address peer, bytes memory endpoint) internal {
        vm.prank(peer);
        coordinator.announceEndpoint(endpoint);
    }

    // ---------------------------------------------------------------- accepted

    function test_AnnounceEndpoint_EmitsTheBytesAsGiven() public {
        _register(alice);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit EndpointAnnounced(alice, ENDPOINT);
        _announce(alice, ENDPOINT);
    }

    function testFuzz_AnnounceEndpoint_EmitsAnyBytesUpToTheCap(bytes calldata endpoint) public {
        vm.assume(endpoint.length <= coordinator.MAX_ENDPOINT_BYTES());
        _register(alice);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit EndpointAnnounced(alice, endpoint);
        _announce(alice, endpoint);
    }

    function test_AnnounceEndpoint_EmptyBytesWithdrawTheEndpoint() public {
        _register(alice);
        _announce(alice, ENDPOINT);
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit EndpointAnnounced(alice, "");
        _announce(alice, "");
    }

    function test_AnnounceEndpoint_AgainEmitsAgain() public {
        _register(alice);
        _announce(alice, ENDPOINT);
        vm.recordLogs();
        _announce(alice, ENDPOINT);
        _announce(alice, "{}");
        assertEq(vm.getRecordedLogs().length, 2, "one event per announcement");
    }

    function test_AnnounceEndpoint_AcceptsExactlyTheCap() public {
        _register(alice);
        bytes memory endpoint = new bytes(512);
        assertEq(coordinator.MAX_ENDPOINT_BYTES(), 512, "cap");
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit EndpointAnnounced(alice, endpoint);
        _announce(alice, endpoint);
    }

    function test_AnnounceEndpoint_WorksWhilePaused() public {
        _register(alice);
        coordinator.pause();
        vm.expectEmit(true, true, true, true, address(coordinator));
        emit EndpointAnnounced(alice, ENDPOINT);
        _announce(alice, ENDPOINT);
    }

    /// @dev The event is the only record: no slot is written, the peer's record is unchanged.
    function test_AnnounceEndpoint_WritesNoStorage() public {
        _register(alice);
        PeerInfo memory before = _peer(alice);
        vm.record();
        _announce(alice, ENDPOINT);
        (, bytes32[] memory writes) = vm.accesses(address(coordinator));
        assertEq(writes.length, 0, "storage writes");
        PeerInfo memory after_ = _peer(alice);
        assertEq(after_.stake, before.stake, "stake");
        assertEq(uint8(after_.status), uint8(before.status), "status");
        assertEq(after_.nextAttestRound, before.nextAttestRound, "nextAttestRound");
    }

    // ---------------------------------------------------------------- refused

    function test_AnnounceEndpoint_RevertsOneByteOverTheCap() public {
        _register(alice);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorEndpointTooLong.selector, 513, 512));
        _announce(alice, new bytes(513));
    }

    function testFuzz_AnnounceEndpoint_LengthDecides(uint256 length) public {
        length = bound(length, 0, 2_048);
        _register(alice);
        if (length > 512) {
            vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorEndpointTooLong.selector, length, 512));
        } else {
            vm.expectEmit(true, true, true, true, address(coordinator));
            emit EndpointAnnounced(alice, new bytes(length));
        }
        _announce(alice, new bytes(length));
    }

    function test_AnnounceEndpoint_RevertsForNonPeer() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, stranger));
        _announce(stranger, ENDPOINT);
    }

    /// @dev A non-peer is refused before its (oversized) bytes are looked at.
    function test_AnnounceEndpoint_NonPeerCheckedBeforeLength() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, stranger));
        _announce(stranger, new bytes(513));
    }

    function testFuzz_AnnounceEndpoint_RevertsForAnyNonPeer(address caller) public {
        vm.assume(caller != alice);
        _register(alice);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, caller));
        _announce(caller, ENDPOINT);
    }

    function test_AnnounceEndpoint_RevertsWhileExiting() public {
        _register(alice);
        _exit(alice);
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, alice));
        _announce(alice, ENDPOINT);
    }

    function test_AnnounceEndpoint_RevertsAfterWithdraw() public {
        _register(alice);
        _exit(alice);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(alice);
        coordinator.withdraw();
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorNotActive.selector, alice));
        _announce(alice, ENDPOINT);
    }
}
