// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {EvidenceExtension} from "../src/EvidenceExtension.sol";
import {ISwarmCoordinator as I} from "../src/ISwarmCoordinator.sol";
import {CoordinatorTest} from "./utils/CoordinatorTest.sol";

/// @notice Full-transaction gas of the calls a node makes, against the brief's budgets.
/// @dev forge's per-test gas and `--gas-report` count execution only. Here each test makes exactly one call
/// into a state prepared in setUp (a separate transaction, so every account and slot starts cold, as in
/// a real transaction) and reports
///   exec     = vm.lastCallGas().gasTotalUsed  (gas used inside the coordinator's frame)
///   calldata = 4 gas per zero byte + 16 per non-zero byte of the exact calldata sent (EIP-2028)
///   total    = 21,000 + calldata + exec       (what the sender's receipt shows; no refunds occur here
///                                              except in withdraw, resolveFlag and claim, see GAS.md)
/// Run `forge test --mc GasTest -vv` to print the figures. Each total is also written by `vm.snapshotValue` to
/// contracts/snapshots/SwarmCoordinatorTxGas.json (`snapshots` in foundry.toml); contracts/GAS.md explains them.
contract GasTest is CoordinatorTest {
    uint256 internal constant TX_BASE = 21_000;
    uint64 internal constant C = 10_000; // the current round of every measurement (~2 weeks at 2-minute rounds)
    uint64 internal constant S = C - J - 1; // settleable now
    uint64 internal constant Q = C - GRACE - COMMIT - 1; // first round of its reveal phase now
    uint64 internal constant P = Q - 1; // last round of its reveal phase now; others revealed already
    uint256 internal constant SUBJECTS = 8;

    uint256 internal constant PUBLISH_BUDGET = 55_000;
    uint256 internal constant REVEAL_FIRST_PER_ITEM_BUDGET = 30_000;
    uint256 internal constant COMMIT_BUDGET = 50_000;

    address[SUBJECTS] internal subjects;
    address internal newcomer = address(0x7E57);
    address internal leaver;

    mapping(bytes32 => bytes) internal calls;

    function setUp() public override {
        super.setUp();
        subjects = _sortedSubjects();
        for (uint256 i = 0; i < SUBJECTS; ++i) {
            _register(subjects[i]);
        }
        _register(alice);
        _register(bob);
        _register(carol);
        _register(dave);
        _register(erin);
        leaver = _labelled(0x1EA7E, "leaver");
        _register(leaver);
        _warpToRound(C - BONDED);
        _exit(leaver);
        _prepareSettlement();
        _prepareReveals();
        _prepareCalls();
        vm.deal(newcomer, 1 ether);
    }

    /// @dev Round S: s0 and s2 flagged by all five attesters (upheld), s1 by alice alone (inconclusive: under the floor), s3 flagged
    /// by all five and agreed by s4 (upheld); s2 and s3 are settled before the measurements.
    function _prepareSettlement() private {
        _warpToRound(S);
        for (uint256 i = 0; i < 5; ++i) {
            _publish(subjects[i], S);
        }
        _warpToRound(_commitPhase(S));
        _seal(S);
        address[5] memory attesters = [alice, bob, carol, dave, erin];
        for (uint256 i = 0; i < 5; ++i) {
            _commit(attesters[i], S, _settlementItems(i == 0));
        }
        _commit(subjects[4], S, _one(_agree(subjects[3])));
        _warpToRound(_revealPhase(S));
        for (uint256 i = 0; i < 5; ++i) {
            _reveal(attesters[i], S, _settlementItems(i == 0));
        }
        _reveal(subjects[4], S, _one(_agree(subjects[3])));
    }

    function _settlementItems(bool withLoneFlag) private view returns (I.VerdictItem[] memory items) {
        items = new I.VerdictItem[](withLoneFlag ? 4 : 3);
        uint256 n = 0;
        for (uint256 i = 0; i < 4; ++i) {
            if (i == 1 && !withLoneFlag) continue;
            items[n++] = _flag(subjects[i]);
        }
        _sort(items);
    }

    /// @dev Round P: bob and carol revealed agreements on the 8 subjects; alice committed the same. Round Q:
    /// alice committed 8 agreements, dave 8 flags, erin 1 agreement; nobody revealed Q yet.
    function _prepareReveals() private {
        _warpToRound(P);
        for (uint256 i = 0; i < SUBJECTS; ++i) {
            _publish(subjects[i], P);
        }
        _warpToRound(Q);
        for (uint256 i = 0; i < SUBJECTS; ++i) {
            _publish(subjects[i], Q);
        }
        _warpToRound(_commitPhase(P));
        _seal(P);
        _commit(alice, P, _batch(false));
        _commit(bob, P, _batch(false));
        _commit(carol, P, _batch(false));
        _warpToRound(_commitPhase(Q));
        _seal(Q);
        _commit(alice, Q, _batch(false));
        _commit(dave, Q, _batch(true));
        _commit(erin, Q, _one(_agree(subjects[0])));
        _warpToRound(_revealPhase(P));
        _reveal(bob, P, _batch(false));
        _reveal(carol, P, _batch(false));
        _publish(alice, C - 1);
        _warpToRound(C);
        vm.warp(block.timestamp + 37);
        coordinator.settle(S, subjects[2]);
        coordinator.settle(S, subjects[3]);
    }

    function _prepareCalls() private {
        calls["register"] = abi.encodeCall(coordinator.register, ("volunteer-node-0042"));
        bytes32 digest = sha256("a realistic stored batch of round C");
        calls["publish"] = abi.encodeCall(coordinator.publishRollouts, (C, digest, 8, 64, 41_250));
        uint64 deadline = uint64(block.timestamp + 300);
        bytes memory sig = _signature(ALICE_KEY, _publishHashOf(alice, C, digest, sponsor, deadline));
        calls["publishFor"] = abi.encodeCall(
            coordinator.publishRolloutsFor, (alice, C, digest, 8, 64, 41_250, sponsor, deadline, sig)
        );
        calls["seal"] = abi.encodeCall(coordinator.sealRound, (C - GRACE - 1));
        // C - GRACE - 2 is armed a block before the measurement, so the measured call draws its beacon.
        coordinator.sealRound(C - GRACE - 2);
        vm.setBlockhash(block.number, keccak256("beacon block of the gas test"));
        vm.roll(block.number + 1);
        calls["sealDraw"] = abi.encodeCall(coordinator.sealRound, (C - GRACE - 2));
        calls["commit"] = abi.encodeCall(
            coordinator.commitVerdicts, (C - GRACE - 1, _commitment(bob, C - GRACE - 1, _batch(false), SALT))
        );
        calls["reveal8first"] = abi.encodeCall(coordinator.revealVerdicts, (Q, _batch(false), SALT));
        calls["reveal8flags"] = abi.encodeCall(coordinator.revealVerdicts, (Q, _batch(true), SALT));
        calls["reveal1"] = abi.encodeCall(coordinator.revealVerdicts, (Q, _one(_agree(subjects[0])), SALT));
        calls["reveal8after"] = abi.encodeCall(coordinator.revealVerdicts, (P, _batch(false), SALT));
        calls["settleUpheld"] = abi.encodeCall(coordinator.settle, (S, subjects[0]));
        calls["settleInconclusive"] = abi.encodeCall(coordinator.settle, (S, subjects[1]));
        calls["resolve"] = abi.encodeCall(coordinator.resolveFlag, (S, subjects[2], bob));
        calls["report"] =
            abi.encodeCall(coordinator.reportAgreement, (S, subjects[4], _one(_agree(subjects[3])), 0));
        calls["withdraw"] = abi.encodeCall(coordinator.withdraw, ());
        calls["announce"] = abi.encodeCall(
            coordinator.announceEndpoint,
            (
                bytes(
                    '{"addrs":["/ip4/93.184.216.34/tcp/4001","/ip4/93.184.216.34/udp/4001/quic-v1"],'
                    '"peer_id":"12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"}'
                )
            )
        );
    }

    /// @dev Harness work (copying the prepared calldata from storage, logging, asserting) is not metered.
    modifier onlyTheCallMetered() {
        vm.pauseGasMetering();
        _;
    }

    function test_Gas_Register() public onlyTheCallMetered {
        _measure("register", newcomer, 1 ether, calls["register"], 1);
    }

    /// @dev alice published in C-1 already; (C, alice) is a fresh slot.
    function test_Gas_PublishRollouts() public onlyTheCallMetered {
        uint256 total = _measure("publishRollouts", alice, 0, calls["publish"], 1);
        assertLe(total, PUBLISH_BUDGET, "publishRollouts budget");
    }

    /// @dev Relayed by the sponsor it names; the sponsor pays ecrecover and the signature's calldata.
    function test_Gas_PublishRolloutsFor() public onlyTheCallMetered {
        _measure("publishRolloutsFor", sponsor, 0, calls["publishFor"], 1);
    }

    /// @dev The first call of a round: it fixes the beacon block.
    function test_Gas_SealRound() public onlyTheCallMetered {
        _measure("sealRound", stranger, 0, calls["seal"], 1);
    }

    /// @dev The second call: the beacon from the fixed block's hash, the total weight from the round deltas.
    function test_Gas_SealRoundDraw() public onlyTheCallMetered {
        _measure("sealRound, draw", stranger, 0, calls["sealDraw"], 1);
    }

    /// @dev bob committed earlier rounds; (round, bob) is a fresh slot.
    function test_Gas_CommitVerdicts() public onlyTheCallMetered {
        vm.deal(bob, 1 ether);
        uint256 total = _measure("commitVerdicts", bob, COMMIT_DEPOSIT, calls["commit"], 1);
        assertLe(total, COMMIT_BUDGET, "commitVerdicts budget");
    }

    /// @dev alice is the first voter on each of the 8 subjects of Q, all agreements.
    function test_Gas_Reveal8_FirstVoter() public onlyTheCallMetered {
        uint256 total = _measure("revealVerdicts 8, first voter", alice, 0, calls["reveal8first"], SUBJECTS);
        assertLe(total, REVEAL_FIRST_PER_ITEM_BUDGET * SUBJECTS, "reveal (first voter) budget");
    }

    /// @dev bob and carol voted on the 8 subjects of P before.
    function test_Gas_Reveal8_AfterOthers() public onlyTheCallMetered {
        _measure("revealVerdicts 8, after others", alice, 0, calls["reveal8after"], SUBJECTS);
    }

    /// @dev A batch of one, for the fixed part of reveal.
    function test_Gas_Reveal1_FirstVoter() public onlyTheCallMetered {
        _measure("revealVerdicts 1, first voter", erin, 0, calls["reveal1"], 1);
    }

    /// @dev Worst case: every item is the subject's first flag (a bond locked, a flag record, a dispute opened).
    function test_Gas_Reveal8_FirstFlags() public onlyTheCallMetered {
        _measure("revealVerdicts 8, first flags", dave, 0, calls["reveal8flags"], SUBJECTS);
    }

    function test_Gas_SettleUpheld() public onlyTheCallMetered {
        _measure("settle, upheld", stranger, 0, calls["settleUpheld"], 1);
    }

    function test_Gas_SettleInconclusive() public onlyTheCallMetered {
        _measure("settle, inconclusive", stranger, 0, calls["settleInconclusive"], 1);
    }

    /// @dev An upheld flag, not the last one of its verdict.
    function test_Gas_ResolveFlag() public onlyTheCallMetered {
        _measure("resolveFlag, upheld", stranger, 0, calls["resolve"], 1);
    }

    function test_Gas_ReportAgreement() public onlyTheCallMetered {
        _measure("reportAgreement", stranger, 0, calls["report"], 1);
    }

    function test_Gas_Withdraw() public onlyTheCallMetered {
        _measure("withdraw", leaver, 0, calls["withdraw"], 1);
    }

    /// @dev A node's announcement: a peer id and two public addresses (144 bytes); made at most once per start.
    function test_Gas_AnnounceEndpoint() public onlyTheCallMetered {
        _measure("announceEndpoint", alice, 0, calls["announce"], 1);
    }

    /// @dev A recomputing seat's evidence on a batch of C - 2 (its commit phase), prepared in the test and then
    /// cooled (`vm.cool`: the coordinator's slots and the extension's account cold, as in a real transaction).
    function test_Gas_PostEvidence() public onlyTheCallMetered {
        uint64 r = C - GRACE - 1;
        address subject = subjects[0];
        _warpToRound(C - 1);
        _publish(subject, r);
        _warpToRound(C);
        address poster = _sealForARecomputingSeat(r, subject);
        vm.cool(address(coordinator));
        vm.cool(_extensionAddress());
        bytes memory data = abi.encodeCall(EvidenceExtension.postEvidence, (r, subject, 3, 5, 2));
        _measure("postEvidence", poster, 0, data, 1);
    }

    /// @dev Seals round `r` with the first beacon under which one of the five attesters recomputes `subject`.
    function _sealForARecomputingSeat(uint64 r, address subject) private returns (address) {
        address[5] memory attesters = [alice, bob, carol, dave, erin];
        for (uint256 i = 0; i < 100; ++i) {
            uint256 snapshot = vm.snapshotState();
            _sealWith(r, keccak256(abi.encode("gas test beacon", i)));
            for (uint256 a = 0; a < attesters.length; ++a) {
                if (EvidenceExtension(address(coordinator)).recomputes(r, subject, attesters[a])) return attesters[a];
            }
            vm.revertToState(snapshot);
        }
        revert("no beacon seats a recomputing attester");
    }

    /// @dev The extension is the first contract the coordinator created (nonce 1).
    function _extensionAddress() private view returns (address) {
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes2(0xd694), address(coordinator), bytes1(0x01))))));
    }

    // ---------------------------------------------------------------- helpers

    function _measure(string memory what, address sender, uint256 value, bytes memory data, uint256 perItems)
        private
        returns (uint256 total)
    {
        // Only the call itself is metered, so `forge snapshot` (contracts/.gas-snapshot) tracks it rather than
        // the harness; the snapshot figure is exec plus the test's CALL overhead, not the transaction total.
        vm.prank(sender);
        vm.resumeGasMetering();
        (bool ok, bytes memory reason) = address(coordinator).call{value: value}(data);
        vm.pauseGasMetering();
        if (!ok) {
            assembly {
                revert(add(reason, 32), mload(reason))
            }
        }
        uint256 exec = vm.lastCallGas().gasTotalUsed;
        uint256 calldataGas = _calldataGas(data);
        total = TX_BASE + calldataGas + exec;
        vm.snapshotValue("SwarmCoordinatorTxGas", what, total);
        emit log_string(what);
        emit log_named_uint("  exec (forge figure)", exec);
        emit log_named_uint("  calldata", calldataGas);
        emit log_named_uint("  total (tx)", total);
        if (perItems > 1) emit log_named_uint("  total per item", total / perItems);
    }

    function _calldataGas(bytes memory data) private pure returns (uint256 gas) {
        for (uint256 i = 0; i < data.length; ++i) {
            gas += data[i] == 0 ? 4 : 16;
        }
    }

    function _publishHashOf(address peer, uint64 round, bytes32 digest, address relayer, uint64 deadline)
        private
        view
        returns (bytes32)
    {
        bytes32 structHash = keccak256(
            abi.encode(
                coordinator.PUBLISH_TYPEHASH(), peer, round, digest, uint32(8), uint32(64), int64(41_250), relayer, deadline
            )
        );
        return keccak256(abi.encodePacked("\x19\x01", coordinator.domainSeparator(), structHash));
    }

    function _batch(bool flags) private view returns (I.VerdictItem[] memory items) {
        items = new I.VerdictItem[](SUBJECTS);
        for (uint256 i = 0; i < SUBJECTS; ++i) {
            items[i] = flags ? _flag(subjects[i]) : _agree(subjects[i]);
        }
    }

    function _sortedSubjects() private pure returns (address[SUBJECTS] memory sorted) {
        for (uint256 i = 0; i < SUBJECTS; ++i) {
            sorted[i] = vm.addr(0x5000 + i);
        }
        for (uint256 i = 1; i < SUBJECTS; ++i) {
            for (uint256 j = i; j > 0 && sorted[j] < sorted[j - 1]; --j) {
                (sorted[j], sorted[j - 1]) = (sorted[j - 1], sorted[j]);
            }
        }
    }
}
