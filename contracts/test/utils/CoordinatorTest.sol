// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator as I} from "../../src/ISwarmCoordinator.sol";
import {SwarmCoordinator} from "../../src/SwarmCoordinator.sol";
import {TestBase} from "./TestBase.sol";

/// @title CoordinatorTest
/// @notice Shared fixture: a coordinator with the deployment defaults (g=1, c=2, v=2, so J=5), five peers with
/// known keys, and helpers that publish, seal, commit, reveal, settle and sign the way nodes do.
/// @dev Tests name the interface's types, errors and events as `I.Name`.
abstract contract CoordinatorTest is TestBase {
    uint64 internal constant ROUND = 120;
    uint256 internal constant START = 1_700_000_000;
    uint16 internal constant GRACE = 1;
    uint16 internal constant COMMIT = 2;
    uint16 internal constant REVEAL = 2;
    uint64 internal constant J = GRACE + COMMIT + REVEAL;
    /// @dev Rounds from an exit round to its withdrawal: J to judge, J more to settle and report.
    uint64 internal constant BONDED = 2 * J + 1;
    uint96 internal constant MIN_STAKE = 0.01 ether;
    uint96 internal constant FLAG_BOND = 0.001 ether;
    uint256 internal constant COMMIT_DEPOSIT = 0.0001 ether;
    uint16 internal constant COMMITTEE = 64;
    uint16 internal constant QUORUM_BPS = 5_000;
    uint16 internal constant FLOOR_BPS = 3_334;
    uint16 internal constant SLASH_BPS = 1_000;
    uint16 internal constant REWARD_BPS = 5_000;
    uint16 internal constant TIP_BPS = 500;
    uint16 internal constant TASKS = 8;
    uint16 internal constant GROUP = 8;
    bytes32 internal constant SEED_INPUT = keccak256("swarm test seed");
    bytes32 internal constant PREVRANDAO = bytes32(uint256(0xabcdef));
    /// @dev The hash the tests give a round's beacon block.
    bytes32 internal constant BLOCKHASH = keccak256("beacon block");
    bytes32 internal constant SALT = keccak256("salt");
    /// @dev The round the unit tests judge: peers registered in round 0 count from round 1.
    uint64 internal constant R = 10;

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
        vm.roll(100);
        vm.prevrandao(PREVRANDAO);
        owner = address(this);
        coordinator = _deploy(SEED_INPUT);
        alice = _labelled(ALICE_KEY, "alice");
        bob = _labelled(BOB_KEY, "bob");
        carol = _labelled(CAROL_KEY, "carol");
        dave = _labelled(DAVE_KEY, "dave");
        erin = _labelled(ERIN_KEY, "erin");
        vm.label(address(coordinator), "coordinator");
        vm.label(stranger, "stranger");
        vm.label(sponsor, "sponsor");
    }

    function _deploy(bytes32 seedInput) internal returns (SwarmCoordinator) {
        return new SwarmCoordinator(ROUND, seedInput, defaultPhases(), MIN_STAKE, COMMIT_DEPOSIT, defaultRules());
    }

    function defaultPhases() internal pure returns (I.Phases memory) {
        return I.Phases({graceRounds: GRACE, commitRounds: COMMIT, revealRounds: REVEAL});
    }

    function defaultRules() internal pure returns (I.Rules memory) {
        return I.Rules({
            fromRound: 0,
            flagBond: FLAG_BOND,
            committeeSize: COMMITTEE,
            quorumBps: QUORUM_BPS,
            floorBps: FLOOR_BPS,
            slashBps: SLASH_BPS,
            rewardBps: REWARD_BPS,
            tipBps: TIP_BPS,
            tasksPerRound: TASKS,
            groupSize: GROUP
        });
    }

    // ---------------------------------------------------------------- time

    function _warpToRound(uint64 round) internal {
        vm.warp(uint256(coordinator.genesis()) + uint256(round) * ROUND);
        vm.roll(block.number + 1);
    }

    function _commitPhase(uint64 round) internal pure returns (uint64) {
        return round + GRACE + 1;
    }

    function _revealPhase(uint64 round) internal pure returns (uint64) {
        return round + GRACE + COMMIT + 1;
    }

    function _settleable(uint64 round) internal pure returns (uint64) {
        return round + J + 1;
    }

    // ---------------------------------------------------------------- peers

    function _labelled(uint256 key, string memory name) internal returns (address account) {
        account = vm.addr(key);
        vm.label(account, name);
    }

    function _register(address peer, uint256 stake) internal {
        vm.deal(peer, peer.balance + stake);
        vm.prank(peer);
        coordinator.register{value: stake}("peer");
    }

    function _register(address peer) internal {
        _register(peer, 1 ether);
    }

    function _exit(address peer) internal {
        vm.prank(peer);
        coordinator.requestExit();
    }

    function _peer(address peer) internal view returns (I.PeerInfo memory) {
        return coordinator.peerInfo(peer);
    }

    // ---------------------------------------------------------------- publications

    function _digest(address peer, uint64 round) internal pure returns (bytes32) {
        return keccak256(abi.encode("swarm.rollouts/2", peer, round)); // stands in for a SHA-256 digest
    }

    /// @dev keccak256, not sha256: a precompile call would consume a pending prank or expectRevert.
    function _publish(address peer, uint64 round) internal {
        bytes32 digest = _digest(peer, round);
        vm.prank(peer);
        coordinator.publishRollouts(round, digest, 8, 64, 41_250);
    }

    // ---------------------------------------------------------------- verdicts

    function _item(address subject, uint32 checked, uint32 agreed) internal pure returns (I.VerdictItem memory) {
        return I.VerdictItem({
            subject: subject, checked: checked, agreed: agreed, verifiedRewardSum: int64(uint64(agreed)) * 1_000
        });
    }

    function _agree(address subject) internal pure returns (I.VerdictItem memory) {
        return _item(subject, 8, 8);
    }

    function _flag(address subject) internal pure returns (I.VerdictItem memory) {
        return _item(subject, 8, 5);
    }

    function _one(I.VerdictItem memory item) internal pure returns (I.VerdictItem[] memory items) {
        items = new I.VerdictItem[](1);
        items[0] = item;
    }

    function _two(I.VerdictItem memory a, I.VerdictItem memory b) internal pure returns (I.VerdictItem[] memory items) {
        items = new I.VerdictItem[](2);
        items[0] = a;
        items[1] = b;
        _sort(items);
    }

    function _none() internal pure returns (I.VerdictItem[] memory) {
        return new I.VerdictItem[](0);
    }

    /// @dev Sorts by subject ascending, the order revealVerdicts requires.
    function _sort(I.VerdictItem[] memory items) internal pure returns (I.VerdictItem[] memory) {
        for (uint256 i = 1; i < items.length; ++i) {
            for (uint256 j = i; j > 0 && items[j].subject < items[j - 1].subject; --j) {
                (items[j], items[j - 1]) = (items[j - 1], items[j]);
            }
        }
        return items;
    }

    function _commitment(address attester, uint64 round, I.VerdictItem[] memory items, bytes32 salt)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(attester, round, keccak256(abi.encode(items)), salt));
    }

    function _receipt(I.VerdictItem[] memory items) internal pure returns (bytes32) {
        return keccak256(abi.encode(keccak256(abi.encode(items)), "revealed"));
    }

    /// @dev Seals as nodes do: the first call fixes the beacon block, the next one (a block later) draws.
    function _seal(uint64 round) internal {
        _sealWith(round, BLOCKHASH);
    }

    /// @dev Seals `round` with `hash` as its beacon block's hash (a stand-in for the chain's own).
    function _sealWith(uint64 round, bytes32 hash) internal {
        coordinator.sealRound(round);
        vm.setBlockhash(block.number, hash);
        vm.roll(block.number + 1);
        coordinator.sealRound(round);
    }

    function _commit(address attester, uint64 round, I.VerdictItem[] memory items) internal {
        bytes32 commitment = _commitment(attester, round, items, SALT);
        vm.deal(attester, attester.balance + COMMIT_DEPOSIT); // given here; the reveal sends it back
        vm.prank(attester);
        coordinator.commitVerdicts{value: COMMIT_DEPOSIT}(round, commitment);
    }

    function _reveal(address attester, uint64 round, I.VerdictItem[] memory items) internal {
        vm.prank(attester);
        coordinator.revealVerdicts(round, items, SALT);
    }

    /// @dev Seals `round` and has each attester commit, then reveal, its items (the whole judging of a round).
    function _judge(uint64 round, address[] memory attesters, I.VerdictItem[][] memory items) internal {
        _warpToRound(_commitPhase(round));
        _seal(round);
        for (uint256 i = 0; i < attesters.length; ++i) {
            _commit(attesters[i], round, items[i]);
        }
        _warpToRound(_revealPhase(round));
        for (uint256 i = 0; i < attesters.length; ++i) {
            _reveal(attesters[i], round, items[i]);
        }
    }

    function _judge1(uint64 round, address attester, I.VerdictItem memory item) internal {
        address[] memory attesters = new address[](1);
        attesters[0] = attester;
        I.VerdictItem[][] memory items = new I.VerdictItem[][](1);
        items[0] = _one(item);
        _judge(round, attesters, items);
    }

    function _judge2(uint64 round, address a, I.VerdictItem memory itemA, address b, I.VerdictItem memory itemB)
        internal
    {
        address[] memory attesters = new address[](2);
        attesters[0] = a;
        attesters[1] = b;
        I.VerdictItem[][] memory items = new I.VerdictItem[][](2);
        items[0] = _one(itemA);
        items[1] = _one(itemB);
        _judge(round, attesters, items);
    }

    function _settle(uint64 round, address subject) internal {
        _warpToRound(_settleable(round));
        vm.prank(stranger);
        coordinator.settle(round, subject);
    }

    // ---------------------------------------------------------------- committee (the seat rule, computed here)

    function _beacon(bytes32 beaconBlockHash, uint64 round) internal view returns (bytes20) {
        return bytes20(keccak256(abi.encode(beaconBlockHash, coordinator.roundSeed(round))));
    }

    function _voteWeight(bytes20 beacon, uint256 total, uint256 k, address subject, address attester, uint256 w)
        internal
        pure
        returns (uint256)
    {
        if (w == 0 || total == 0 || attester == subject) return 0;
        if (k * w >= total) return w;
        uint256 draw;
        unchecked {
            // the subject's point on the ring minus the attester's (docs/PROTOCOL.md, "Seats")
            draw = uint256(keccak256(abi.encode(beacon, subject))) - uint256(keccak256(abi.encode(attester, beacon)));
        }
        return draw < (type(uint256).max / total) * (k * w) ? total / k : 0;
    }

    // ---------------------------------------------------------------- EIP-712 (from the brief, not read back)

    function _domainSeparator(uint256 chainId, address verifyingContract, bytes32 salt)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(
            abi.encode(
                keccak256(
                    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract,bytes32 salt)"
                ),
                keccak256("SwarmCoordinator"),
                keccak256("2"),
                chainId,
                verifyingContract,
                salt
            )
        );
    }

    function _publishHash(address peer, uint64 round, bytes32 digest, address relayer, uint64 deadline)
        internal
        view
        returns (bytes32)
    {
        bytes32 structHash = keccak256(
            abi.encode(
                keccak256(
                    "Publish(address peer,uint64 round,bytes32 digest,uint32 groups,uint32 completions,int64 rewardSum,address relayer,uint64 deadline)"
                ),
                peer,
                round,
                digest,
                uint32(8),
                uint32(64),
                int64(41_250),
                relayer,
                deadline
            )
        );
        bytes32 domain = _domainSeparator(block.chainid, address(coordinator), coordinator.genesisSeed());
        return keccak256(abi.encodePacked("\x19\x01", domain, structHash));
    }

    function _signature(uint256 key, bytes32 hash) internal pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(key, hash);
        return abi.encodePacked(r, s, v);
    }

    function _signPublish(uint256 key, address peer, uint64 round, address relayer, uint64 deadline)
        internal
        view
        returns (bytes memory)
    {
        return _signature(key, _publishHash(peer, round, _digest(peer, round), relayer, deadline));
    }

    function _publishFor(address relayer_, address peer, uint64 round, address relayer, uint64 deadline, bytes memory sig)
        internal
    {
        bytes32 digest = _digest(peer, round);
        vm.prank(relayer_);
        coordinator.publishRolloutsFor(peer, round, digest, 8, 64, 41_250, relayer, deadline, sig);
    }
}
