"""The deployment record: where a coordinator lives and how it was made, as one JSON file.

Written by ``swarm-deploy``, read by nodes and the indexer. Loading checks the file's ABI hash
against the ABI committed in this package, so a node never talks to a contract through the wrong
ABI: a mismatch asks for the deployment file that goes with this version of the software.

    {"schema": "swarm.deployment/2", "chain_id": 31337, "coordinator": "0x...", ...}

Schema 2 (protocol v2) records the immutable ``phases`` and the ``min_stake`` and ``rules`` in
force at deployment (later rules are on chain: ``rulesAt``).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Final, Literal

from pydantic import Field, ValidationError

from node.chain.abi import abi_sha256
from node.chain.errors import DeploymentFileError
from node.chain.models import Address, FrozenModel, HashHex, Phases, Rules

SCHEMA: Final = "swarm.deployment/2"


class Deployment(FrozenModel):
    """One deployed SwarmCoordinator."""

    schema_: Literal["swarm.deployment/2"] = Field(default=SCHEMA, alias="schema")
    chain_id: int = Field(
        gt=0, description="EIP-155 chain id of the chain the coordinator lives on."
    )
    coordinator: Address = Field(description="The coordinator contract's address.")
    deployment_block: int = Field(
        ge=0, description="Block that created the contract (indexers start here)."
    )
    block_hash: HashHex = Field(description="Hash of that block (detects a chain that was reset).")
    tx_hash: HashHex = Field(description="The creation transaction.")
    deployer: Address = Field(description="Account that deployed (the initial owner).")
    abi_sha256: str = Field(
        pattern=r"^0x[0-9a-f]{64}$", description="SHA-256 of the ABI's canonical JSON."
    )
    genesis: int = Field(ge=0, description="Unix time at which round 0 starts.")
    round_duration: int = Field(gt=0, description="Seconds per round.")
    genesis_seed: HashHex = Field(
        description="The contract's genesisSeed (round seeds derive from it)."
    )
    seed_input: HashHex = Field(description="The deployer's contribution to the genesis seed.")
    phases: Phases = Field(description="Grace, commit and reveal rounds (immutable).")
    min_stake: int = Field(gt=0, lt=2**96, description="Minimum stake at deployment (wei).")
    rules: Rules = Field(
        description="Rules at deployment (the owner may schedule others: rulesAt on chain)."
    )
    clock: Literal["real", "jumps"] = Field(
        default="real",
        description="real: rounds pass with time; jumps: a local demo moves this dev chain's "
        "clock forward a round at a time (swarm doctor then accepts a chain ahead of the machine).",
    )

    model_config = FrozenModel.model_config | {"populate_by_name": True}

    def save(self, path: Path) -> Path:
        """Writes the record as pretty JSON, atomically (a crash never leaves half a file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: Path, *, check_abi: bool = True) -> Deployment:
        """Reads a record; raises DeploymentFileError (missing, malformed, or for another ABI)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DeploymentFileError(
                f"deployment file {path} not found: deploy a coordinator with `swarm-deploy` or "
                "get the "
                "deployment file of the swarm you want to join"
            ) from None
        except OSError as exc:
            raise DeploymentFileError(f"cannot read deployment file {path}: {exc}") from exc
        deployment = cls.from_json(text, source=str(path))
        if check_abi:
            deployment.check_abi()
        return deployment

    @classmethod
    def from_json(cls, text: str, *, source: str = "deployment") -> Deployment:
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()
            )
            raise DeploymentFileError(
                f"{source} is not a valid deployment record ({problems})"
            ) from None

    def check_abi(self) -> None:
        """Raises DeploymentFileError unless the record was made with the committed ABI."""
        expected = abi_sha256()
        if self.abi_sha256 != expected:
            raise DeploymentFileError(
                f"the deployment at {self.coordinator} (chain {self.chain_id}) was made with ABI "
                f"{self.abi_sha256[:18]}..., but this software speaks ABI {expected[:18]}...: "
                "upgrade the software or use a deployment file of this version"
            )
