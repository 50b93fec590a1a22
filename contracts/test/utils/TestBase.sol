// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "./Vm.sol";

/// @title TestBase
/// @notice Cheatcode handle, assertions and fuzz helpers for forge tests without forge-std.
/// @dev An assertion failure reverts with a readable message; forge reports the test as failed.
abstract contract TestBase {
    /// @dev forge serves cheatcodes at this address.
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    /// @dev forge prints these (as DSTest does) with `-vv`.
    event log_named_uint(string key, uint256 val);
    event log_named_int(string key, int256 val);
    event log_string(string val);

    // ---------------------------------------------------------------- assertions

    function assertTrue(bool condition, string memory message) internal pure {
        if (!condition) revert(string.concat("assertion failed: ", message));
    }

    function assertFalse(bool condition, string memory message) internal pure {
        assertTrue(!condition, message);
    }

    function assertEq(uint256 left, uint256 right, string memory message) internal pure {
        if (left != right) revert(string.concat(message, ": ", _str(left), " != ", _str(right)));
    }

    function assertEq(int256 left, int256 right, string memory message) internal pure {
        if (left != right) revert(string.concat(message, ": ", _str(left), " != ", _str(right)));
    }

    function assertEq(address left, address right, string memory message) internal pure {
        if (left != right) {
            revert(string.concat(message, ": ", _hex(uint160(left), 20), " != ", _hex(uint160(right), 20)));
        }
    }

    function assertEq(bytes32 left, bytes32 right, string memory message) internal pure {
        if (left != right) {
            revert(string.concat(message, ": ", _hex(uint256(left), 32), " != ", _hex(uint256(right), 32)));
        }
    }

    function assertEq(bool left, bool right, string memory message) internal pure {
        if (left != right) revert(string.concat(message, left ? ": true != false" : ": false != true"));
    }

    function assertLe(uint256 left, uint256 right, string memory message) internal pure {
        if (left > right) revert(string.concat(message, ": ", _str(left), " > ", _str(right)));
    }

    function assertGe(uint256 left, uint256 right, string memory message) internal pure {
        if (left < right) revert(string.concat(message, ": ", _str(left), " < ", _str(right)));
    }

    // ---------------------------------------------------------------- fuzz helpers

    /// @dev Maps any `x` into [min, max] (inclusive), uniformly enough for fuzzing and without skipping runs.
    function bound(uint256 x, uint256 min, uint256 max) internal pure returns (uint256) {
        require(min <= max, "bound: min > max");
        if (min == 0 && max == type(uint256).max) return x;
        return min + x % (max - min + 1);
    }

    // ---------------------------------------------------------------- formatting

    function _str(uint256 value) internal pure returns (string memory) {
        if (value == 0) return "0";
        uint256 digits;
        for (uint256 v = value; v != 0; v /= 10) {
            ++digits;
        }
        bytes memory out = new bytes(digits);
        for (uint256 v = value; v != 0; v /= 10) {
            out[--digits] = bytes1(uint8(48 + v % 10));
        }
        return string(out);
    }

    function _str(int256 value) internal pure returns (string memory) {
        if (value >= 0) return _str(uint256(value));
        return string.concat("-", _str(value == type(int256).min ? uint256(1 << 255) : uint256(-value)));
    }

    function _hex(uint256 value, uint256 length) internal pure returns (string memory) {
        bytes memory out = new bytes(2 + 2 * length);
        out[0] = "0";
        out[1] = "x";
        for (uint256 i = 2 * length + 1; i > 1; --i) {
            out[i] = bytes16("0123456789abcdef")[value & 0xf];
            value >>= 4;
        }
        return string(out);
    }
}
