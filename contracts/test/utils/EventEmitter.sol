// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title EventEmitter
/// @notice A stand-in coordinator for the indexer's tests (tests/indexer/emitter.py): it emits any log it is
/// given and answers any view with bytes set beforehand, so the indexer can read, through eth_getLogs, events
/// carrying values the coordinator never emits (2^63 - 1 as a revealed reward sum, uint64 max as a round).
/// @dev Knows no event or view of its own: the test encodes the coordinator's event topics and data, and the
/// views' answers, from the committed ABI, so this contract follows every change of the ABI unchanged.
contract EventEmitter {
    /// @dev keccak256(calldata) or keccak256(selector) => the ABI-encoded answer.
    mapping(bytes32 => bytes) private answers;

    /// @notice Emits one log with these topics (0 to 4; the first is the event's signature hash) and data.
    function emitLog(bytes32[] calldata topics, bytes calldata data) external {
        _emit(topics, data);
    }

    /// @notice Emits `topics.length` logs in this order, all in one transaction (so in one block).
    function emitLogs(bytes32[][] calldata topics, bytes[] calldata data) external {
        require(topics.length == data.length, "one data per log");
        for (uint256 i = 0; i < topics.length; ++i) {
            _emit(topics[i], data[i]);
        }
    }

    function _emit(bytes32[] calldata topics, bytes calldata data) private {
        bytes memory body = data;
        uint256 n = topics.length;
        require(n <= 4, "at most 4 topics");
        bytes32 t0 = n > 0 ? topics[0] : bytes32(0);
        bytes32 t1 = n > 1 ? topics[1] : bytes32(0);
        bytes32 t2 = n > 2 ? topics[2] : bytes32(0);
        bytes32 t3 = n > 3 ? topics[3] : bytes32(0);
        assembly ("memory-safe") {
            let start := add(body, 32)
            let size := mload(body)
            switch n
            case 0 { log0(start, size) }
            case 1 { log1(start, size, t0) }
            case 2 { log2(start, size, t0, t1) }
            case 3 { log3(start, size, t0, t1, t2) }
            default { log4(start, size, t0, t1, t2, t3) }
        }
    }

    /// @notice Sets the answer to a call: `query` is the full calldata (one exact call) or a 4-byte selector
    /// (every call of that function without an exact answer).
    function setAnswer(bytes calldata query, bytes calldata answer) external {
        answers[keccak256(query)] = answer;
    }

    fallback(bytes calldata input) external returns (bytes memory) {
        bytes memory answer = answers[keccak256(input)];
        if (answer.length == 0 && input.length >= 4) answer = answers[keccak256(input[:4])];
        require(answer.length > 0, "EventEmitter: no answer set for this call");
        return answer;
    }
}
