"""A small swarm played on the test chain with real transactions, and what the leaderboard must
show for it (worked out by hand below, not by the indexer's code).

Five peers register with 2 ETH (erin never publishes). Round r and r+1: four peers publish. In
round r+2 each attests the others' batches (dave only round r); carol's round-r claim of 9.0 is
flagged by alice and bob. In round r+3 carol's dispute is settled (2 flags > 1 agreement, quorum 2:
half her stake slashed), bob adds 1 ETH and dave requests exit.

Verified reward per batch = median of the attested values (even count: mean of the middle two):

    round r     alice [4800, 5000, 4900] -> 4900   bob [4000, 4000, 3900] -> 4000
                carol [1000, 1200, 9000] -> 1200   dave [3000, 2900, 3100] -> 3000
    round r+1   alice [6000, 5800] -> 5900          bob [4500, 4400] -> 4450
                carol [8000, 8000] -> 8000          dave [3500, 3500, 3400] -> 3500

    verified:  alice 10800, carol 9200, bob 8450, dave 6500, erin 0   (the ranking)
    claimed:   carol 17000, alice 11000, bob 8500, dave 6500, erin 0  (what they said)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.models import Attestation
from tests.chain_fixtures import ChainControl

ETHER = 10**18
NAMES = ("alice", "bob", "carol", "dave", "erin")
CLAIMS = {  # name -> (claim in round r, claim in round r+1), milli-units
    "alice": (5000, 6000),
    "bob": (4000, 4500),
    "carol": (9000, 8000),
    "dave": (3000, 3500),
}
#: (attester, round offset, subject) -> (verified reward sum, is a flag)
VERDICTS = {
    ("bob", 0, "alice"): (4800, False),
    ("carol", 0, "alice"): (5000, False),
    ("dave", 0, "alice"): (4900, False),
    ("alice", 0, "bob"): (4000, False),
    ("carol", 0, "bob"): (4000, False),
    ("dave", 0, "bob"): (3900, False),
    ("alice", 0, "carol"): (1000, True),
    ("bob", 0, "carol"): (1200, True),
    ("dave", 0, "carol"): (9000, False),
    ("alice", 0, "dave"): (3000, False),
    ("bob", 0, "dave"): (2900, False),
    ("carol", 0, "dave"): (3100, False),
    ("bob", 1, "alice"): (6000, False),
    ("carol", 1, "alice"): (5800, False),
    ("alice", 1, "bob"): (4500, False),
    ("carol", 1, "bob"): (4400, False),
    ("alice", 1, "carol"): (8000, False),
    ("bob", 1, "carol"): (8000, False),
    ("alice", 1, "dave"): (3500, False),
    ("bob", 1, "dave"): (3500, False),
    ("carol", 1, "dave"): (3400, False),
}
EXPECTED_VERIFIED = {"alice": 10800, "carol": 9200, "bob": 8450, "dave": 6500, "erin": 0}
EXPECTED_CLAIMED = {"alice": 11000, "bob": 8500, "carol": 17000, "dave": 6500, "erin": 0}
EXPECTED_RANKING = ["alice", "carol", "bob", "dave", "erin"]
EXPECTED_STAKE = {"alice": 2, "bob": 3, "carol": 1, "dave": 2, "erin": 2}  # ETH


def digest(name: str, round_: int, label: str = "") -> bytes:
    return hashlib.sha256(f"{name}-{round_}-{label}".encode()).digest()


@dataclass
class Swarm:
    """The played scenario: first round and a client per peer name."""

    round: int
    clients: dict[str, CoordinatorClient]

    def address(self, name: str) -> str:
        address = self.clients[name].account_address
        assert address is not None
        return address

    def names_by_address(self) -> dict[str, str]:
        return {self.address(name): name for name in self.clients}


def register(
    client_for: Callable[..., CoordinatorClient], accounts: Sequence[LocalAccount]
) -> dict[str, CoordinatorClient]:
    clients = {}
    for name, account in zip(NAMES, accounts, strict=False):
        clients[name] = client_for(account)
        clients[name].register(name, 2 * ETHER)
    return clients


def publish_round(clients: dict[str, CoordinatorClient], round_: int, offset: int) -> None:
    for name, claims in CLAIMS.items():
        clients[name].publish_rollouts(
            round_, digest(name, round_), groups=4, completions=32, reward_sum=claims[offset]
        )


def attest_all(clients: dict[str, CoordinatorClient], round_: int) -> None:
    """Every attester's verdicts for rounds r and r+1 in one batch (the contract's rule)."""
    for attester in CLAIMS:
        items = [
            Attestation(
                round=round_ + offset,
                subject=clients[subject].account_address,
                digest=digest(subject, round_ + offset),
                checked=8,
                agreed=7 if flag else 8,
                verified_reward_sum=value,
            )
            for (who, offset, subject), (value, flag) in VERDICTS.items()
            if who == attester
        ]
        clients[attester].attest(items)


def play(
    chain: ChainControl,
    client_for: Callable[..., CoordinatorClient],
    accounts: Sequence[LocalAccount],
    *,
    phases: int = 4,
    between: Callable[[int], None] | None = None,
) -> Swarm:
    """Plays the scenario's first ``phases`` phases; ``between(phase)`` runs after each."""
    clients = register(client_for, accounts[:5])
    round_ = chain.current_round()
    steps = [
        lambda: publish_round(clients, round_, 0),
        lambda: (chain.warp_to_round(round_ + 1), publish_round(clients, round_ + 1, 1)),
        lambda: (chain.warp_to_round(round_ + 2), attest_all(clients, round_)),
        lambda: (
            chain.warp_to_round(round_ + 3),
            clients["erin"].settle(round_, clients["carol"].account_address),
            clients["bob"].add_stake(ETHER),
            clients["dave"].request_exit(),
        ),
    ]
    for phase, step in enumerate(steps[:phases]):
        step()
        if between is not None:
            between(phase)
    return Swarm(round=round_, clients=clients)
