// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CoordinatorTest} from "./utils/CoordinatorTest.sol";
import {SwarmCoordinator} from "../src/SwarmCoordinator.sol";

/// @notice Deployment, rounds from time, round seeds and the EIP-712 domain.
contract RoundsTest is CoordinatorTest {
    // ---------------------------------------------------------------- deployment

    function test_Constructor_SetsImmutablesOwnerTreasuryAndParameters() public view {
        assertEq(coordinator.genesis(), START, "genesis = deployment time");
        assertEq(coordinator.roundDuration(), ROUND, "roundDuration");
        assertEq(coordinator.owner(), owner, "owner");
        assertEq(coordinator.treasury(), owner, "treasury");
        assertEq(coordinator.pendingOwner(), address(0), "pendingOwner");
        assertEq(coordinator.unclaimedSlashes(), 0, "unclaimedSlashes");
        assertFalse(coordinator.paused(), "starts unpaused");
        Parameters memory p = coordinator.parameters();
        assertEq(p.minStake, MIN_STAKE, "minStake");
        assertEq(p.unbondingPeriod, UNBONDING, "unbondingPeriod");
        assertEq(p.graceRounds, GRACE, "graceRounds");
        assertEq(p.attestationWindowRounds, WINDOW, "attestationWindowRounds");
        assertEq(p.slashBps, SLASH_BPS, "slashBps");
        assertEq(p.disputeQuorum, QUORUM, "disputeQuorum");
        assertFalse(p.paused, "paused");
    }

    function test_Constructor_GenesisSeedMixesPrevrandaoInputChainAndAddress() public view {
        bytes32 expected = keccak256(abi.encode(PREVRANDAO, SEED_INPUT, block.chainid, address(coordinator)));
        assertEq(coordinator.genesisSeed(), expected, "genesisSeed");
    }

    function test_Constructor_EmitsOwnerTreasuryAndEveryParameter() public {
        vm.expectEmit(true, true, true, true);
        emit OwnershipTransferred(address(0), address(this));
        vm.expectEmit(true, true, true, true);
        emit TreasuryChanged(address(this));
        vm.expectEmit(true, true, true, true);
        emit ParametersChanged("minStake", MIN_STAKE);
        vm.expectEmit(true, true, true, true);
        emit ParametersChanged("slashBps", SLASH_BPS);
        vm.expectEmit(true, true, true, true);
        emit ParametersChanged("disputeQuorum", QUORUM);
        vm.expectEmit(true, true, true, true);
        emit ParametersChanged("attestationWindowRounds", WINDOW);
        vm.expectEmit(true, true, true, true);
        emit ParametersChanged("graceRounds", GRACE);
        vm.expectEmit(true, true, true, true);
        emit ParametersChanged("unbondingPeriod", UNBONDING);
        new SwarmCoordinator(ROUND, SEED_INPUT, defaultParams());
    }

    function test_Constructor_IgnoresPausedFlag() public {
        Parameters memory p = defaultParams();
        p.paused = true;
        SwarmCoordinator other = new SwarmCoordinator(ROUND, SEED_INPUT, p);
        assertFalse(other.paused(), "unpaused");
    }

    function test_Constructor_RevertsOnZeroRoundDuration() public {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidParameter.selector, bytes32("roundDuration"), 0));
        new SwarmCoordinator(0, SEED_INPUT, defaultParams());
    }

    function test_Constructor_RevertsOnZeroMinStake() public {
        Parameters memory p = defaultParams();
        p.minStake = 0;
        _expectDeployRevert(p, "minStake", 0);
    }

    function test_Constructor_RevertsOnSlashAbove100Percent() public {
        Parameters memory p = defaultParams();
        p.slashBps = 10_001;
        _expectDeployRevert(p, "slashBps", 10_001);
    }

    function test_Constructor_RevertsOnZeroQuorum() public {
        Parameters memory p = defaultParams();
        p.disputeQuorum = 0;
        _expectDeployRevert(p, "disputeQuorum", 0);
    }

    function test_Constructor_RevertsOnZeroAttestationWindow() public {
        Parameters memory p = defaultParams();
        p.attestationWindowRounds = 0;
        p.graceRounds = 0;
        _expectDeployRevert(p, "attestationWindowRounds", 0);
    }

    function test_Constructor_RevertsOnGraceBeyondWindow() public {
        Parameters memory p = defaultParams();
        p.graceRounds = WINDOW + 1;
        _expectDeployRevert(p, "graceRounds", WINDOW + 1);
    }

    function test_Constructor_RevertsOnUnbondingShorterThanWindow() public {
        Parameters memory p = defaultParams();
        p.unbondingPeriod = uint32((WINDOW + 1) * ROUND - 1);
        _expectDeployRevert(p, "unbondingPeriod", (WINDOW + 1) * ROUND - 1);
    }

    // ---------------------------------------------------------------- currentRound

    function test_CurrentRound_FollowsTime() public {
        assertEq(coordinator.currentRound(), 0, "at genesis");
        vm.warp(START + ROUND - 1);
        assertEq(coordinator.currentRound(), 0, "last second of round 0");
        vm.warp(START + ROUND);
        assertEq(coordinator.currentRound(), 1, "first second of round 1");
        vm.warp(START + 1000 * uint256(ROUND) + 17);
        assertEq(coordinator.currentRound(), 1000, "round 1000");
    }

    function testFuzz_CurrentRound_IsElapsedOverDuration(uint256 offset) public {
        offset = bound(offset, 0, 100 * 365 days);
        vm.warp(START + offset);
        assertEq(coordinator.currentRound(), offset / ROUND, "round");
    }

    // ---------------------------------------------------------------- roundSeed

    function test_RoundSeed_MatchesProtocolFormula() public view {
        bytes32 genesisSeed = coordinator.genesisSeed();
        assertEq(coordinator.roundSeed(0), keccak256(abi.encode(genesisSeed, uint64(0))), "round 0");
        assertEq(coordinator.roundSeed(7), keccak256(abi.encode(genesisSeed, uint64(7))), "round 7");
        assertTrue(coordinator.roundSeed(0) != coordinator.roundSeed(1), "rounds differ");
    }

    function testFuzz_RoundSeed_MatchesProtocolFormula(uint64 round, uint256 offset) public {
        offset = bound(offset, 0, 10 * 365 days);
        vm.warp(START + offset);
        // The seed is a pure function of (genesisSeed, round): time does not change it.
        assertEq(coordinator.roundSeed(round), keccak256(abi.encode(coordinator.genesisSeed(), round)), "roundSeed");
    }

    function testFuzz_RoundSeed_DependsOnSeedInput(bytes32 otherInput) public {
        vm.assume(otherInput != SEED_INPUT);
        SwarmCoordinator other = new SwarmCoordinator(ROUND, otherInput, defaultParams());
        assertTrue(other.genesisSeed() != coordinator.genesisSeed(), "seed input changes the seed");
    }

    // ---------------------------------------------------------------- EIP-712 domain

    function test_DomainSeparator_MatchesProtocol() public view {
        assertEq(coordinator.domainSeparator(), _domainSeparator(block.chainid, address(coordinator)), "domain");
        assertEq(
            coordinator.PUBLISH_TYPEHASH(),
            keccak256(
                "Publish(address peer,uint64 round,bytes32 digest,uint32 groups,uint32 completions,int64 rewardSum)"
            ),
            "type hash"
        );
    }

    function test_DomainSeparator_FollowsChainId() public {
        vm.chainId(31_337_777);
        assertEq(coordinator.domainSeparator(), _domainSeparator(31_337_777, address(coordinator)), "after fork");
    }

    // ---------------------------------------------------------------- helpers

    function _expectDeployRevert(Parameters memory p, bytes32 name, uint256 value) private {
        vm.expectRevert(abi.encodeWithSelector(SwarmCoordinatorInvalidParameter.selector, name, value));
        new SwarmCoordinator(ROUND, SEED_INPUT, p);
    }
}
