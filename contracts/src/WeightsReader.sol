// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ISwarmCoordinator} from "./ISwarmCoordinator.sol";

/// @title WeightsReader
/// @notice Never deployed: the indexer runs its creation code with `eth_call` (no `to`), and the
/// constructor's return data is the answer. One call reads `weightAt(peer, round)` of many peers
/// at one block, where one `eth_call` per peer cost the indexer ~75 us each (docs/INDEXER.md).
/// @dev Any failed or malformed `weightAt` answer reverts the whole read, and the indexer then
/// reads peer by peer, as before: the reader never turns an odd chain into a wrong weight.
contract WeightsReader {
    /// @param coordinator The coordinator to read.
    /// @param round The round whose weights are read.
    /// @param peers The peers, in the order of the returned weights.
    constructor(ISwarmCoordinator coordinator, uint64 round, address[] memory peers) {
        uint256[] memory weights = new uint256[](peers.length);
        for (uint256 i = 0; i < peers.length; ++i) {
            weights[i] = coordinator.weightAt(peers[i], round);
        }
        bytes memory answer = abi.encode(weights);
        // The creation code's return data is the answer: returned as-is, no code is deployed.
        assembly ("memory-safe") {
            return(add(answer, 32), mload(answer))
        }
    }
}
