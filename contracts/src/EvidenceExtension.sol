// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISwarmCoordinator} from "./ISwarmCoordinator.sol";

/// @title EvidenceExtension: where a batch fails its provenance recompute (docs/PROTOCOL.md, "Who recomputes,
/// and the tolerances").
/// @notice The coordinator's extension: SwarmCoordinator's fallback delegatecalls it, so its functions are called
/// at the coordinator's address, its event is the coordinator's and its errors are the coordinator's. It lives
/// apart only because the coordinator's code is at the EIP-170 limit. It reads the coordinator through its public
/// views (calls to `address(this)`) and keeps its one mapping at a storage slot of its own (ERC-7201), which no
/// variable of the coordinator uses. Called directly, every function reverts: `address(this)` has no views.
contract EvidenceExtension {
    /// @notice m: the seats per batch, on average, that recompute its provenance (node/provenance/choice.py).
    uint256 public constant RECOMPUTING_SEATS = 3;

    /// @custom:storage-location erc7201:swarm.provenance.evidence
    struct Posted {
        mapping(uint64 round => mapping(address subject => mapping(address poster => bool))) posted;
    }

    // keccak256(abi.encode(uint256(keccak256("swarm.provenance.evidence")) - 1)) & ~bytes32(uint256(0xff))
    bytes32 private constant _POSTED_SLOT = 0x77732a016828a811dfd6e574fdcce72e1fc33bf8ff0605e2058deda5ca574700;

    /// @notice Posts where `subject`'s batch of `round` fails the caller's provenance recompute, so that every
    /// other committee member re-checks that one group before it commits.
    /// @dev Requirements: rounds `round + g + 1 .. round + g + c`; `subject` published `round`; `group < n` and
    /// `completion < G` of `rulesAt(round)`; the caller is one of the seats that recompute the batch
    /// (`recomputes`; the round is then sealed); the caller's first evidence on (round, subject). The contract
    /// cannot check a recompute: members treat evidence only as a reason to recompute the group themselves.
    /// Works while paused. Emits {ProvenanceEvidence}.
    /// @param round The judged round.
    /// @param subject The publishing peer.
    /// @param group The failing group's index in the batch.
    /// @param completion The failing completion's index in its group.
    /// @param token The completion's first token below the hard tolerance.
    function postEvidence(uint64 round, address subject, uint32 group, uint32 completion, uint32 token)
        external
    {
        ISwarmCoordinator coordinator = ISwarmCoordinator(address(this));
        uint64 first = round + coordinator.graceRounds() + 1;
        uint64 last = first + coordinator.commitRounds() - 1;
        uint64 current = coordinator.currentRound();
        if (current < first || current > last) revert ISwarmCoordinator.SwarmCoordinatorWrongPhase(round, first, last);
        if (coordinator.verdict(round, subject).state != ISwarmCoordinator.VerdictState.Published) {
            revert ISwarmCoordinator.SwarmCoordinatorNoPublication(round, subject);
        }
        ISwarmCoordinator.Rules memory rules = coordinator.rulesAt(round);
        if (group >= rules.tasksPerRound || completion >= rules.groupSize) {
            revert ISwarmCoordinator.SwarmCoordinatorInvalidEvidence(group, completion);
        }
        if (!recomputes(round, subject, msg.sender)) {
            revert ISwarmCoordinator.SwarmCoordinatorNotRecomputing(round, subject, msg.sender);
        }
        mapping(address => bool) storage posted = _posted().posted[round][subject];
        if (posted[msg.sender]) revert ISwarmCoordinator.SwarmCoordinatorAlreadyPosted(round, subject, msg.sender);
        posted[msg.sender] = true;
        emit ISwarmCoordinator.ProvenanceEvidence(round, subject, msg.sender, group, completion, token);
    }

    /// @notice Whether `attester` sits on `subject`'s committee of the sealed `round` and recomputes its batch:
    /// every seat when k <= m, else a seat whose draw
    /// `uint256(keccak256("swarm.provenance/seat/1" ‖ beacon ‖ subject ‖ attester))` is below `(2^256 - 1) / k * m`.
    /// @param round The round.
    /// @param subject The publishing peer.
    /// @param attester The committee member.
    function recomputes(uint64 round, address subject, address attester) public view returns (bool) {
        ISwarmCoordinator coordinator = ISwarmCoordinator(address(this));
        (bool seated,) = coordinator.committeeSeat(round, subject, attester);
        if (!seated) return false;
        uint256 k = coordinator.rulesAt(round).committeeSize;
        if (RECOMPUTING_SEATS >= k) return true;
        bytes20 beacon = coordinator.seal(round).beacon;
        uint256 draw = uint256(keccak256(abi.encodePacked("swarm.provenance/seat/1", beacon, subject, attester)));
        return draw < (type(uint256).max / k) * RECOMPUTING_SEATS;
    }

    function _posted() private pure returns (Posted storage store) {
        bytes32 slot = _POSTED_SLOT;
        assembly {
            store.slot := slot
        }
    }
}
