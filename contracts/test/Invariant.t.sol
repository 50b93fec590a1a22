// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator} from "../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";
import {SwarmHandler} from "./utils/SwarmHandler.sol";
import {TestBase} from "./utils/TestBase.sol";

/// @notice Stake accounting and dispute bookkeeping hold after any sequence of handler actions.
/// @dev forge reads `targetContracts()` and `targetSelectors()` from the test contract (the forge-std
/// StdInvariant pattern, written out here).
contract InvariantTest is TestBase {
    /// @dev Layout forge expects from `targetSelectors()`.
    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    SwarmHandler internal handler;
    SwarmCoordinator internal coordinator;

    function setUp() public {
        vm.warp(1_700_000_000);
        handler = new SwarmHandler();
        coordinator = handler.coordinator();
    }

    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    function targetSelectors() public view returns (FuzzSelector[] memory targets) {
        bytes4[] memory selectors = new bytes4[](17);
        selectors[0] = SwarmHandler.register.selector;
        selectors[1] = SwarmHandler.addStake.selector;
        selectors[2] = SwarmHandler.requestExit.selector;
        selectors[3] = SwarmHandler.withdraw.selector;
        selectors[4] = SwarmHandler.publish.selector;
        selectors[5] = SwarmHandler.publishFor.selector;
        selectors[6] = SwarmHandler.attest.selector;
        selectors[7] = SwarmHandler.attest.selector; // attest twice as often: disputes need several flags
        selectors[8] = SwarmHandler.settle.selector;
        selectors[9] = SwarmHandler.claim.selector;
        selectors[10] = SwarmHandler.setSlashBps.selector;
        selectors[11] = SwarmHandler.setMinStake.selector;
        selectors[12] = SwarmHandler.togglePause.selector;
        selectors[13] = SwarmHandler.warp.selector;
        selectors[14] = SwarmHandler.setDisputeQuorum.selector;
        selectors[15] = SwarmHandler.settle.selector; // settle and claim twice as often too: they come last
        selectors[16] = SwarmHandler.claim.selector;
        targets = new FuzzSelector[](1);
        targets[0] = FuzzSelector({addr: address(handler), selectors: selectors});
    }

    /// @notice The coordinator holds exactly the stake of active and exiting peers plus unclaimed slashes;
    /// peers that never registered or withdrew hold nothing.
    function invariant_BalanceIsStakesPlusUnclaimedSlashes() public view {
        address[] memory actors = handler.actors();
        uint256 staked = 0;
        for (uint256 i = 0; i < actors.length; ++i) {
            ISwarmCoordinator.PeerInfo memory info = coordinator.peerInfo(actors[i]);
            if (
                info.status == ISwarmCoordinator.PeerStatus.Active
                    || info.status == ISwarmCoordinator.PeerStatus.Exiting
            ) {
                staked += info.stake;
            } else {
                assertEq(info.stake, 0, "withdrawn or unknown peer holds stake");
            }
        }
        assertEq(address(coordinator).balance, staked + coordinator.unclaimedSlashes(), "balance");
    }

    /// @notice Every wei is accounted for: in = deposits; out = withdrawals + claims; slashes = unclaimed + claimed.
    function invariant_EtherFlowsMatchGhostBooks() public view {
        assertEq(
            address(coordinator).balance,
            handler.ghostDeposited() - handler.ghostWithdrawn() - handler.ghostClaimed(),
            "balance vs flows"
        );
        assertEq(
            coordinator.unclaimedSlashes(), handler.ghostSlashed() - handler.ghostClaimed(), "unclaimed vs slashes"
        );
        assertEq(handler.violations(), 0, "a handler check failed (withdraw, claim or slash amount)");
    }

    /// @notice A peer's openDisputes is the number of its flagged rounds not settled yet.
    function invariant_OpenDisputesCountFlaggedUnsettledRounds() public view {
        address[] memory actors = handler.actors();
        for (uint256 i = 0; i < actors.length; ++i) {
            assertEq(coordinator.peerInfo(actors[i]).openDisputes, handler.ghostOpenDisputes(actors[i]), "openDisputes");
        }
    }

    /// @notice On-chain tallies equal the attestations the handler made.
    function invariant_VerdictsMatchAttestations() public view {
        uint256 n = handler.trackedCount();
        for (uint256 i = 0; i < n; ++i) {
            (uint64 round, address subject) = handler.tracked(i);
            ISwarmCoordinator.Verdict memory v = coordinator.verdict(round, subject);
            assertEq(v.flags, handler.ghostFlags(round, subject), "flags");
            assertEq(v.agreements, handler.ghostAgreements(round, subject), "agreements");
            assertEq(v.settled, handler.ghostSettled(round, subject), "settled");
        }
    }
}
