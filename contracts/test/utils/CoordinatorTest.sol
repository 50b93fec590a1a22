// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator} from "../../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../../src/SwarmCoordinator.sol";
import {TestBase} from "./TestBase.sol";

/// @title CoordinatorTest
/// @notice Shared fixture: a coordinator with known parameters, five peers with known keys, and helpers
/// that publish, attest and sign the way nodes do.
/// @dev Inherits the interface so tests can `emit` its events after `vm.expectEmit` and name its errors.
abstract contract CoordinatorTest is TestBase, ISwarmCoordinator {
    uint64 internal constant ROUND = 600;
    uint256 internal constant START = 1_700_000_000;
    uint96 internal constant MIN_STAKE = 1 ether;
    uint32 internal constant UNBONDING = 4 * 600;
    uint16 internal constant GRACE = 1;
    uint16 internal constant WINDOW = 2;
    uint16 internal constant SLASH_BPS = 1_000;
    uint16 internal constant QUORUM = 2;
    bytes32 internal constant SEED_INPUT = keccak256("swarm test seed");
    bytes32 internal constant PREVRANDAO = bytes32(uint256(0xabcdef));

    /// @dev secp256k1 group order: (r, n - s, v ^ 1) is the malleable twin of (r, s, v).
    uint256 internal constant SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141;

    uint256 internal constant ALICE_KEY = 0xA11CE;
    uint256 internal constant BOB_KEY = 0xB0B;
    uint256 internal constant CAROL_KEY = 0xCA401;
    uint256 internal constant DAVE_KEY = 0xDA7E;
    uint256 internal constant ERIN_KEY = 0xE417;

    SwarmCoordinator internal coordinator;
    address internal owner;
    address internal alice;
    address internal bob;
    address internal carol;
    address internal dave;
    address internal erin;
    address internal stranger = address(0x5742);
    address internal sponsor = address(0x5905);

    function setUp() public virtual {
        vm.warp(START);
        vm.prevrandao(PREVRANDAO);
        owner = address(this);
        coordinator = new SwarmCoordinator(ROUND, SEED_INPUT, defaultParams());
        alice = _labelled(ALICE_KEY, "alice");
        bob = _labelled(BOB_KEY, "bob");
        carol = _labelled(CAROL_KEY, "carol");
        dave = _labelled(DAVE_KEY, "dave");
        erin = _labelled(ERIN_KEY, "erin");
        vm.label(address(coordinator), "coordinator");
        vm.label(stranger, "stranger");
        vm.label(sponsor, "sponsor");
    }

    /// @dev The owner (this contract) is also the treasury and receives claimed slashes.
    receive() external payable {}

    function defaultParams() internal pure returns (Parameters memory) {
        return Parameters({
            minStake: MIN_STAKE,
            unbondingPeriod: UNBONDING,
            graceRounds: GRACE,
            attestationWindowRounds: WINDOW,
            slashBps: SLASH_BPS,
            disputeQuorum: QUORUM,
            paused: false
        });
    }

    // ---------------------------------------------------------------- time

    function _warpToRound(uint64 round) internal {
        vm.warp(uint256(coordinator.genesis()) + uint256(round) * ROUND);
    }

    // ---------------------------------------------------------------- peers

    function _labelled(uint256 key, string memory name) private returns (address account) {
        account = vm.addr(key);
        vm.label(account, name);
    }

    function _register(address peer, uint256 stake) internal {
        vm.deal(peer, peer.balance + stake);
        vm.prank(peer);
        coordinator.register{value: stake}("peer");
    }

    function _register(address peer) internal {
        _register(peer, MIN_STAKE);
    }

    function _exit(address peer) internal {
        vm.prank(peer);
        coordinator.requestExit();
    }

    function _peer(address peer) internal view returns (PeerInfo memory) {
        return coordinator.peerInfo(peer);
    }

    // ---------------------------------------------------------------- publications

    function _digest(address peer, uint64 round) internal pure returns (bytes32) {
        return sha256(abi.encode("swarm.rollouts/1", peer, round));
    }

    /// @dev The digest is computed before the prank: sha256 is a precompile call and would consume it.
    function _publish(address peer, uint64 round) internal {
        bytes32 digest = _digest(peer, round);
        vm.prank(peer);
        coordinator.publishRollouts(round, digest, 8, 64, 41_250);
    }

    // ---------------------------------------------------------------- attestations

    function _item(uint64 round, address subject, uint32 checked, uint32 agreed)
        internal
        pure
        returns (Attestation memory)
    {
        return Attestation({
            round: round,
            subject: subject,
            digest: _digest(subject, round),
            checked: checked,
            agreed: agreed,
            verifiedRewardSum: int64(uint64(agreed)) * 1_000
        });
    }

    function _agree(uint64 round, address subject) internal pure returns (Attestation memory) {
        return _item(round, subject, 8, 8);
    }

    function _flag(uint64 round, address subject) internal pure returns (Attestation memory) {
        return _item(round, subject, 8, 5);
    }

    function _one(Attestation memory item) internal pure returns (Attestation[] memory items) {
        items = new Attestation[](1);
        items[0] = item;
    }

    function _attest(address attester, Attestation memory item) internal {
        vm.prank(attester);
        coordinator.attest(_one(item));
    }

    /// @dev Sorts by (round, subject) ascending, the order attest() requires.
    function _sort(Attestation[] memory items) internal pure returns (Attestation[] memory) {
        for (uint256 i = 1; i < items.length; ++i) {
            for (uint256 j = i; j > 0 && _before(items[j], items[j - 1]); --j) {
                (items[j], items[j - 1]) = (items[j - 1], items[j]);
            }
        }
        return items;
    }

    function _before(Attestation memory a, Attestation memory b) private pure returns (bool) {
        return a.round < b.round || (a.round == b.round && a.subject < b.subject);
    }

    // ---------------------------------------------------------------- EIP-712 (computed from docs/PROTOCOL.md, "EIP-712", not read back)

    function _domainSeparator(uint256 chainId, address verifyingContract) internal pure returns (bytes32) {
        return keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256("SwarmCoordinator"),
                keccak256("1"),
                chainId,
                verifyingContract
            )
        );
    }

    function _publishHash(
        address peer,
        uint64 round,
        bytes32 digest,
        uint32 groups,
        uint32 completions,
        int64 rewardSum
    ) internal view returns (bytes32) {
        bytes32 structHash = keccak256(
            abi.encode(
                keccak256(
                    "Publish(address peer,uint64 round,bytes32 digest,uint32 groups,uint32 completions,int64 rewardSum)"
                ),
                peer,
                round,
                digest,
                groups,
                completions,
                rewardSum
            )
        );
        return
            keccak256(abi.encodePacked("\x19\x01", _domainSeparator(block.chainid, address(coordinator)), structHash));
    }

    function _signature(uint256 key, bytes32 hash) internal pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(key, hash);
        return abi.encodePacked(r, s, v);
    }

    function _signPublish(uint256 key, address peer, uint64 round, bytes32 digest)
        internal
        view
        returns (bytes memory)
    {
        return _signature(key, _publishHash(peer, round, digest, 8, 64, 41_250));
    }
}
