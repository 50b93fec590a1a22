"""The node's chain layer: bindings to the SwarmCoordinator contract (no torch, no transformers).

Modules, one concern each:

- ``abi``           the committed ABI, its hash, regeneration from the forge build
- ``errors``        the exception family (retryable or not)
- ``reverts``       one exception class per Solidity custom error
- ``revert_decoding``  revert bytes -> the matching exception
- ``units``         ether amounts and times shown to humans
- ``models``        typed ABI values: PeerInfo, Phases, Rules, Verdict, SealInfo, VerdictItem,
                    TxReceipt
- ``committee``     the seat rule, ballot commitments and reveal receipts (pure)
- ``rpc``           Web3 construction, error classification, retry with backoff
- ``transactions``  nonce, gas, fees, local signing, receipts, revert recovery
- ``client``        ``CoordinatorClient``: a typed method per contract function
- ``eip712``        the protocol's typed data (Publish, RolloutBatch): hashing, signing, recovery
                    (domain version 2, salted with the genesis seed)
- ``events``        typed events and a chunked log reader
- ``rounds``        round arithmetic and round seeds from genesis
- ``deployment``    the deployment record file
- ``deployer``      deploying a coordinator; ``deploy``: the ``swarm-deploy`` command

The names below are importable from ``node.chain`` directly; they load on first use, so
``python -m node.chain.abi`` and light users do not import the whole layer.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CoordinatorClient": "client",
    "Deployment": "deployment",
    "DeployConfig": "deployer",
    "deploy_coordinator": "deployer",
    "Domain": "eip712",
    "ChainError": "errors",
    "ContractRevert": "errors",
    "PermanentChainError": "errors",
    "RetryableChainError": "errors",
    "EventReader": "events",
    "Phases": "models",
    "PeerInfo": "models",
    "PeerStatus": "models",
    "Rules": "models",
    "SealInfo": "models",
    "TxReceipt": "models",
    "Verdict": "models",
    "VerdictItem": "models",
    "VerdictState": "models",
    "ballot_commitment": "committee",
    "vote_weight": "committee",
    "RoundClock": "rounds",
    "round_seed": "rounds",
    "RetryPolicy": "rpc",
    "connect": "rpc",
    "TransactionSender": "transactions",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'node.chain' has no attribute {name!r}")
    return getattr(importlib.import_module(f"node.chain.{_EXPORTS[name]}"), name)
