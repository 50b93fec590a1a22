// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";
import {SwarmHandler} from "./utils/SwarmHandler.sol";
import {TestBase} from "./utils/TestBase.sol";

/// @notice Ether accounting, no stake locked for good and fixed rules per round hold after any sequence of
/// handler actions (every action of the coordinator, every owner setter included).
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
        bytes4[] memory s = new bytes4[](20);
        s[0] = SwarmHandler.register.selector;
        s[1] = SwarmHandler.addStake.selector;
        s[2] = SwarmHandler.requestExit.selector;
        s[3] = SwarmHandler.withdraw.selector;
        s[4] = SwarmHandler.claim.selector;
        s[5] = SwarmHandler.publish.selector;
        s[6] = SwarmHandler.publishFor.selector;
        s[7] = SwarmHandler.seal.selector;
        s[8] = SwarmHandler.commit.selector;
        s[9] = SwarmHandler.reveal.selector;
        s[10] = SwarmHandler.settle.selector;
        s[11] = SwarmHandler.resolveFlag.selector;
        s[12] = SwarmHandler.reportAgreement.selector;
        s[13] = SwarmHandler.scheduleParameters.selector;
        s[14] = SwarmHandler.togglePause.selector;
        s[15] = SwarmHandler.warp.selector;
        // The judging steps twice as often: a dispute needs a seal, commits and reveals in order.
        s[16] = SwarmHandler.commit.selector;
        s[17] = SwarmHandler.reveal.selector;
        s[18] = SwarmHandler.publish.selector;
        s[19] = SwarmHandler.seal.selector;
        targets = new FuzzSelector[](1);
        targets[0] = FuzzSelector({addr: address(handler), selectors: s});
    }

    /// @notice balance == sum(stake) + sum(claimable) + burned + reward pools not yet paid out + the commit
    /// deposits of ballots not revealed.
    function invariant_EtherIsAccountedFor() public view {
        address[] memory actors = handler.actors();
        uint256 total = coordinator.burned() + handler.ghostPooled() + coordinator.claimable(handler.KEEPER());
        total += handler.ghostDeposits();
        for (uint256 i = 0; i < actors.length; ++i) {
            total += coordinator.peerInfo(actors[i]).stake + coordinator.claimable(actors[i]);
        }
        assertEq(address(coordinator).balance, total, "balance");
    }

    /// @notice Every withdraw the handler attempted after settling and resolving everything succeeded.
    function invariant_NoStakeLockedForever() public view {
        assertEq(handler.violations(), 0, "a withdraw failed or paid the wrong amount");
    }

    /// @notice The rules of a round never change once it started.
    function invariant_RulesOfStartedRoundsAreFixed() public view {
        uint64[] memory rounds = handler.ruledRounds();
        for (uint256 i = 0; i < rounds.length; ++i) {
            bytes32 now_ = keccak256(abi.encode(coordinator.rulesAt(rounds[i])));
            assertEq(now_, handler.rulesHashSeen(rounds[i]), "rules changed");
        }
    }

    /// @notice Locked bonds never exceed what a peer holds plus what slashes took (bonds are capped by stake).
    function invariant_OpenCountsMatch() public view {
        address[] memory actors = handler.actors();
        for (uint256 i = 0; i < actors.length; ++i) {
            I.PeerInfo memory info = coordinator.peerInfo(actors[i]);
            if (info.openFlags == 0) assertEq(info.lockedBonds, 0, "bonds locked without flags");
            if (info.status == I.PeerStatus.Withdrawn) assertEq(info.stake, 0, "withdrawn peer holds stake");
        }
    }
}
