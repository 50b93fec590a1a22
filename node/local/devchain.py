"""Dev-chain powers of Anvil: time travel, balances, snapshots (never on a real chain)."""

from __future__ import annotations

from web3 import Web3

from node.chain.deployment import Deployment


class DevChain:
    """Time travel and snapshots on an Anvil serving ``deployment``."""

    def __init__(self, w3: Web3, deployment: Deployment) -> None:
        self.w3 = w3
        self.deployment = deployment

    def rpc(self, method: str, *params: object) -> object:
        response = self.w3.provider.make_request(method, list(params))  # type: ignore[arg-type]
        if "error" in response:
            raise RuntimeError(f"{method} failed: {response['error']}")
        return response.get("result")

    def now(self) -> int:
        """Timestamp of the latest block."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def current_round(self) -> int:
        return (self.now() - self.deployment.genesis) // self.deployment.round_duration

    def round_start(self, round: int) -> int:
        return self.deployment.genesis + round * self.deployment.round_duration

    def mine(self, blocks: int = 1) -> None:
        for _ in range(blocks):
            self.rpc("evm_mine")

    def increase_time(self, seconds: int) -> None:
        """Moves chain time forward and mines a block at the new time."""
        self.rpc("evm_increaseTime", seconds)
        self.mine()

    def warp_to(self, timestamp: int) -> None:
        """Mines a block at exactly ``timestamp`` (which must not be in the chain's past)."""
        if timestamp < self.now():
            raise ValueError(f"cannot warp back from {self.now()} to {timestamp}")
        self.rpc("evm_setNextBlockTimestamp", timestamp)
        self.mine()

    def warp_to_round(self, round: int, offset: int = 1) -> None:
        """Moves to ``offset`` seconds into ``round`` (the current or a future round)."""
        self.warp_to(max(self.now(), self.round_start(round) + offset))

    def fund(self, address: str, wei: int) -> None:
        self.rpc("anvil_setBalance", address, hex(wei))

    def balance(self, address: str) -> int:
        return int(self.w3.eth.get_balance(address))

    def snapshot(self) -> str:
        return str(self.rpc("evm_snapshot"))

    def revert(self, snapshot_id: str) -> None:
        if self.rpc("evm_revert", snapshot_id) is not True:
            raise RuntimeError(f"evm_revert({snapshot_id}) failed")
