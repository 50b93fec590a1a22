"""The in-process exchange: the protocol's data path without a chain or a content store.

Each :class:`InProcessNode` is a :class:`SwarmNode` whose batches travel through a dictionary
instead of the store and the chain's ``RolloutsPublished`` events. Everything that decides what a
node learns is the node's own code: the same task derivation from the round seed and the peer's
address, the same generation seeds, the same signed and encoded batch (``build_batch``), the same
verification and re-scoring of every peer batch (``verify_batch`` against a commitment carrying
the batch's digest and counts), the same selection and the same GRPO step (``SwarmNode.train``).
What is skipped: transactions, events, the store, attestations, disputes and the state file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address

from node.chain.eip712 import Domain
from node.chain.events import RolloutsPublished
from node.chain.rounds import round_seed
from node.round.learner import Learner
from node.round.node import NodeSettings, SwarmNode
from node.round.report import RoundReport
from node.sampling.selection import UniformSelection, VerifiedHistorySelection
from node.sampling.verdicts import IntakeReport
from node.sampling.verify import RoundContext, verify_batch
from node.tasks import get_preset

log = logging.getLogger(__name__)

#: Anvil's chain id and the address its first deployment gets: batches look like the chain path's.
CHAIN_ID = 31337
COORDINATOR = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
_ZERO_HASH = "0x" + "00" * 32


def genesis_seed_for(seed: int) -> bytes:
    """The in-process exchange's genesis seed for an experiment seed (the chain's is read)."""
    return keccak(text=f"sapo-experiment/genesis/{seed}")


@dataclass
class InProcessExchange:
    """Published batches by round: the commitment (digest and counts) and the bytes."""

    genesis_seed: bytes
    domain: Domain = field(default_factory=lambda: Domain(CHAIN_ID, COORDINATOR))
    published: dict[int, list[tuple[RolloutsPublished, bytes]]] = field(default_factory=dict)
    round: int = 0
    """The current round (the runner advances it, as time travel does on the dev chain)."""

    def advance(self, round: int) -> None:
        self.round = round
        self.forget_before(round)

    def publish(self, commitment: RolloutsPublished, data: bytes) -> None:
        round_ = self.published.setdefault(commitment.round, [])
        if any(c.peer == commitment.peer for c, _ in round_):
            raise ValueError(f"{commitment.peer} already published round {commitment.round}")
        round_.append((commitment, data))

    def batches(self, round: int) -> list[tuple[RolloutsPublished, bytes]]:
        return list(self.published.get(round, []))

    def forget_before(self, round: int) -> None:
        for old in [r for r in self.published if r < round]:
            del self.published[old]


@dataclass(frozen=True)
class _Sender:
    account: LocalAccount


class _Signer:
    """What ``SwarmNode.build_batch`` asks of a client: the account and the EIP-712 domain."""

    def __init__(self, account: LocalAccount, domain: Domain) -> None:
        self.sender = _Sender(account)
        self.domain = domain
        self.account_address = account.address


class InProcessNode(SwarmNode):
    """A SwarmNode that publishes to and collects from an :class:`InProcessExchange`."""

    def __init__(
        self,
        account: LocalAccount,
        exchange: InProcessExchange,
        learner: Learner,
        settings: NodeSettings,
    ) -> None:
        # Not SwarmNode.__init__: there is no client, deployment, store or state folder.
        self.client = _Signer(account, exchange.domain)  # type: ignore[assignment]
        self.exchange = exchange
        self.learner = learner
        self.settings = settings
        self.address = to_checksum_address(account.address)
        self.preset = get_preset(settings.preset)
        self.strategy = (
            VerifiedHistorySelection()
            if settings.strategy == "verified-history"
            else UniformSelection()
        )
        self.state = None
        self.trained_round = None
        self._own = {}
        self._reports = {}
        self._genesis_seed = exchange.genesis_seed
        self._params = None

    def start(self) -> None:
        """Nothing to check: the exchange is in memory."""

    def produce(self, round: int) -> RoundReport:
        """Generates, scores, signs and encodes the batch, then hands it to the exchange."""
        report = self.report(round)
        batch = self.generate_batch(round, report)
        commitment = RolloutsPublished(
            block_number=0,
            block_hash=_ZERO_HASH,
            tx_hash=_ZERO_HASH,
            log_index=0,
            round=round,
            peer=self.address,
            digest=batch.digest,
            groups=batch.groups,
            completions=batch.completions,
            reward_sum=batch.reward_sum,
            relayer=None,
        )
        self.exchange.publish(commitment, batch.data)
        report.published = "yes"
        report.local_reward = self._own[round].mean_reward
        return report

    def complete(self, round: int) -> RoundReport:
        """Verifies every peer batch of ``round`` and trains on I local + J external groups."""
        report = self.report(round)
        context = RoundContext(self.client.domain, round, round_seed(self._genesis_seed, round))
        intake = IntakeReport(round=round)
        with report.timings.measure("verify"):
            for commitment, data in self.exchange.batches(round):
                if commitment.peer != self.address:
                    intake.verdicts.append(verify_batch(data, commitment, context))
        report.verified_peers = sum(1 for v in intake.verdicts if v.accepted)
        report.rejections.update(intake.rejections)
        self.train(round, intake, report)
        self._own.pop(round, None)
        return self._reports.pop(round)

    def check_chain(self) -> None:
        """No chain."""

    def current_round(self) -> int:
        return self.exchange.round
