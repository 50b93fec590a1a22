// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title Vm
/// @notice The few forge cheatcodes these tests use (forge-std is not available offline).
/// @dev Signatures follow forge 1.x; the interface lives at the cheatcode address, see {TestBase}.
interface Vm {
    /// @notice Gas figures of the last call, from the callee's point of view.
    struct Gas {
        uint64 gasLimit;
        uint64 gasTotalUsed;
        uint64 gasMemoryUsed;
        int64 gasRefunded;
        uint64 gasRemaining;
    }

    /// @notice One log captured by {recordLogs}.
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    // environment
    function warp(uint256 newTimestamp) external;
    function roll(uint256 newHeight) external;
    function prevrandao(bytes32 newPrevrandao) external;
    function setBlockhash(uint256 blockNumber, bytes32 blockHash) external;
    function chainId(uint256 newChainId) external;
    function deal(address account, uint256 newBalance) external;
    function getBlockTimestamp() external view returns (uint256);
    function snapshotState() external returns (uint256 snapshotId);
    function revertToState(uint256 snapshotId) external returns (bool success);

    // callers
    function prank(address msgSender) external;
    function startPrank(address msgSender) external;
    function stopPrank() external;

    // expectations
    function expectRevert() external;
    function expectRevert(bytes4 revertData) external;
    function expectRevert(bytes calldata revertData) external;
    function expectEmit() external;
    function expectEmit(address emitter) external;
    function expectEmit(bool checkTopic1, bool checkTopic2, bool checkTopic3, bool checkData) external;
    function expectEmit(bool checkTopic1, bool checkTopic2, bool checkTopic3, bool checkData, address emitter) external;
    function recordLogs() external;
    function record() external;
    function accesses(address target) external returns (bytes32[] memory readSlots, bytes32[] memory writeSlots);
    function getRecordedLogs() external returns (Log[] memory logs);

    // keys and signatures
    function addr(uint256 privateKey) external pure returns (address keyAddr);
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);

    // fuzzing and labels
    function assume(bool condition) external pure;
    function label(address account, string calldata newLabel) external;

    // gas
    function lastCallGas() external view returns (Gas memory gas);
    function snapshotValue(string calldata group, string calldata name, uint256 value) external;
    function pauseGasMetering() external;
    function resumeGasMetering() external;
    function cool(address target) external;
}
