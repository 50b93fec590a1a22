"""A small v2 swarm played on the test chain with real transactions, and what the leaderboard must
show for it (worked out by hand below, not by the indexer's code).

Six peers register (alice, bob, carol 2 ETH; dave, erin, frank 1 ETH; the test deployment's
committees of 64 expected seats seat every peer on every other peer's committee with its own
stake as vote weight). Rounds r and r+1: alice, bob, carol and dave publish. Both rounds are
sealed (T = 9 ETH) and judged by commit-reveal: carol's round-r claim of 9.0 is flagged by alice
and bob (4 ETH of flags) while her sock puppet dave agrees (1 ETH); frank, a minimum-stake sybil,
flags alice's honest batch alone; erin never votes. Then carol's dispute is settled upheld (half
her stake slashed) and alice's rejected (frank forfeits his 0.1 ETH bond to alice), alice reports
dave's agreement with the upheld batch (0.1 ETH penalty), alice claims, bob adds 1 ETH and erin
requests exit.

Verified reward per batch = stake-weighted median of the committee's values (weights in ETH):

    round r     alice [5000 (2), 5000 (2), 4800 (1), 100 (1)] -> 5000 (frank's flag rejected)
                bob   [4000 (2), 4000 (2), 4000 (1)]          -> 4000
                carol [1000 (2), 1200 (2), 9000 (1)]          -> upheld: 0
                dave  [3000 (2), 3000 (2), 3000 (2)]          -> 3000
    round r+1   alice [6000 (2), 5800 (2), 6000 (1)] -> 6000   bob  [4500, 4400, 4500] -> 4500
                carol [8000 (2), 8000 (2), 8000 (1)] -> 8000   dave [3500, 3500, 3400] -> 3500

    verified:  alice 11000, bob 8500, carol 8000, dave 6500, erin 0, frank 0
    claimed:   carol 17000, alice 11000, bob 8500, dave 6500, erin 0, frank 0

Committee duty (both rounds are past their reveal phase at the end): the four publishers hold
3 seats per round and reveal on all of them; erin holds 4 per round and reveals none; frank holds 4
per round and reveals one (round r, on alice).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.committee import ballot_commitment, new_salt, sort_items
from node.chain.models import VerdictItem
from tests.chain_fixtures import ChainControl

ETHER = 10**18
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank")
STAKES = {"alice": 2, "bob": 2, "carol": 2, "dave": 1, "erin": 1, "frank": 1}  # ETH at register
CLAIMS = {  # name -> (claim in round r, claim in round r+1), milli-units
    "alice": (5000, 6000),
    "bob": (4000, 4500),
    "carol": (9000, 8000),
    "dave": (3000, 3500),
}
#: (attester, round offset, subject) -> (verified reward sum, is a flag)
VOTES = {
    ("alice", 0, "bob"): (4000, False),
    ("alice", 0, "carol"): (1000, True),
    ("alice", 0, "dave"): (3000, False),
    ("bob", 0, "alice"): (5000, False),
    ("bob", 0, "carol"): (1200, True),
    ("bob", 0, "dave"): (3000, False),
    ("carol", 0, "alice"): (5000, False),
    ("carol", 0, "bob"): (4000, False),
    ("carol", 0, "dave"): (3000, False),
    ("dave", 0, "alice"): (4800, False),
    ("dave", 0, "bob"): (4000, False),
    ("dave", 0, "carol"): (9000, False),
    ("frank", 0, "alice"): (100, True),
    ("alice", 1, "bob"): (4500, False),
    ("alice", 1, "carol"): (8000, False),
    ("alice", 1, "dave"): (3500, False),
    ("bob", 1, "alice"): (6000, False),
    ("bob", 1, "carol"): (8000, False),
    ("bob", 1, "dave"): (3500, False),
    ("carol", 1, "alice"): (5800, False),
    ("carol", 1, "bob"): (4400, False),
    ("carol", 1, "dave"): (3400, False),
    ("dave", 1, "alice"): (6000, False),
    ("dave", 1, "bob"): (4500, False),
    ("dave", 1, "carol"): (8000, False),
}
EXPECTED_VERIFIED = {
    "alice": 11000,
    "bob": 8500,
    "carol": 8000,
    "dave": 6500,
    "erin": 0,
    "frank": 0,
}
EXPECTED_CLAIMED = {
    "alice": 11000,
    "bob": 8500,
    "carol": 17000,
    "dave": 6500,
    "erin": 0,
    "frank": 0,
}
EXPECTED_STAKE_WEI = {
    "alice": 2 * ETHER,
    "bob": 3 * ETHER,
    "carol": 1 * ETHER,
    "dave": ETHER - ETHER // 10,
    "erin": 1 * ETHER,
    "frank": ETHER - ETHER // 10,
}
#: name -> (seats held, seats revealed on), both rounds together
EXPECTED_DUTY = {
    "alice": (6, 6),
    "bob": (6, 6),
    "carol": (6, 6),
    "dave": (6, 6),
    "erin": (8, 0),
    "frank": (8, 1),
}
PHASES = 5


def digest(name: str, round_: int, label: str = "") -> bytes:
    return hashlib.sha256(f"{name}-{round_}-{label}".encode()).digest()


@dataclass
class Swarm:
    """The played scenario: first round and a client per peer name."""

    round: int
    clients: dict[str, CoordinatorClient]
    salts: dict[tuple[str, int], bytes] = field(default_factory=dict)

    def address(self, name: str) -> str:
        address = self.clients[name].account_address
        assert address is not None
        return address

    def names_by_address(self) -> dict[str, str]:
        return {self.address(name): name for name in self.clients}

    def ranking(self) -> list[str]:
        """Names by verified reward, then claimed reward, then address (the leaderboard's rank)."""
        return sorted(
            NAMES,
            key=lambda n: (-EXPECTED_VERIFIED[n], -EXPECTED_CLAIMED[n], int(self.address(n), 16)),
        )


def register(
    client_for: Callable[..., CoordinatorClient], accounts: Sequence[LocalAccount]
) -> dict[str, CoordinatorClient]:
    clients = {}
    for name, account in zip(NAMES, accounts, strict=False):
        clients[name] = client_for(account)
        clients[name].register(name, STAKES[name] * ETHER)
    return clients


def publish_round(clients: dict[str, CoordinatorClient], round_: int, offset: int) -> None:
    for name, claims in CLAIMS.items():
        clients[name].publish_rollouts(
            round_, digest(name, round_), groups=4, completions=32, reward_sum=claims[offset]
        )


def items_of(swarm: Swarm, attester: str, offset: int) -> list[VerdictItem]:
    """``attester``'s ballot on round r + ``offset``, sorted as revealed."""
    return sort_items(
        VerdictItem(
            subject=swarm.address(subject),
            checked=8,
            agreed=7 if flag else 8,
            verified_reward_sum=value,
        )
        for (who, off, subject), (value, flag) in VOTES.items()
        if who == attester and off == offset
    )


def _voters(offset: int) -> list[str]:
    return sorted({who for who, off, _ in VOTES if off == offset})


def commit_all(swarm: Swarm) -> None:
    """Seals rounds r and r+1 and commits every ballot (the chain is in both commit phases)."""
    for offset in (0, 1):
        swarm.clients["erin"].seal_round(swarm.round + offset)
        for attester in _voters(offset):
            salt = swarm.salts.setdefault((attester, offset), new_salt())
            commitment = ballot_commitment(
                swarm.address(attester),
                swarm.round + offset,
                items_of(swarm, attester, offset),
                salt,
            )
            swarm.clients[attester].commit_verdicts(swarm.round + offset, commitment)


def reveal_all(swarm: Swarm) -> None:
    for offset in (0, 1):
        for attester in _voters(offset):
            swarm.clients[attester].reveal_verdicts(
                swarm.round + offset,
                items_of(swarm, attester, offset),
                swarm.salts[(attester, offset)],
            )


def settle_all(swarm: Swarm) -> None:
    """Settles carol (upheld) and alice (rejected), resolves the flags, penalizes dave's
    agreement, alice claims, bob adds stake, erin exits."""
    r, clients = swarm.round, swarm.clients
    clients["erin"].settle(r, swarm.address("carol"))
    clients["erin"].settle(r, swarm.address("alice"))
    for flagger in ("alice", "bob"):
        clients["erin"].resolve_flag(r, swarm.address("carol"), swarm.address(flagger))
    clients["erin"].resolve_flag(r, swarm.address("alice"), swarm.address("frank"))
    revealed = items_of(swarm, "dave", 0)
    index = [item.subject for item in revealed].index(swarm.address("carol"))
    clients["alice"].report_agreement(r, swarm.address("dave"), revealed, index)
    clients["alice"].claim()
    clients["bob"].add_stake(ETHER)
    clients["erin"].request_exit()


def play(
    chain: ChainControl,
    client_for: Callable[..., CoordinatorClient],
    accounts: Sequence[LocalAccount],
    *,
    phases: int = PHASES,
    between: Callable[[int], None] | None = None,
) -> Swarm:
    """Plays the scenario's first ``phases`` phases; ``between(phase)`` runs after each.

    0: register, publish round r; 1: publish r+1; 2: seal r and r+1, commit; 3: reveal;
    4: settle and the rest (``settle_all``)."""
    clients = register(client_for, accounts[: len(NAMES)])
    swarm = Swarm(round=chain.current_round() + 1, clients=clients)  # stake counts from r0 + 1
    r = swarm.round
    steps = [
        lambda: (chain.warp_to_round(r), publish_round(clients, r, 0)),
        lambda: (chain.warp_to_round(r + 1), publish_round(clients, r + 1, 1)),
        lambda: (chain.warp_to_round(r + 3), commit_all(swarm)),
        lambda: (chain.warp_to_round(r + 5), reveal_all(swarm)),
        lambda: (chain.warp_to_round(r + 7), settle_all(swarm)),
    ]
    for phase, step in enumerate(steps[:phases]):
        step()
        if between is not None:
            between(phase)
    return swarm


# ------------------------------------------------------------ a tie: an inconclusive settlement

#: Four 1-ETH peers: sam and oli publish in round t, ann and flo judge sam's batch.
TIE_NAMES = ("sam", "oli", "ann", "flo")
#: The test deployment's batch maximum: n x G x 1000 with n = G = 4 (tests/chain_fixtures.py).
TIE_MAX = 4 * 4 * 1000
TIE_CLAIMS = {"sam": TIE_MAX, "oli": TIE_MAX + 1}  # oli claims one milli-unit over the maximum
#: attester -> (verified reward sum for sam's batch, is a flag); 1 ETH of vote weight each
TIE_VOTES = {"ann": (TIE_MAX, False), "flo": (2000, True)}
#: The weighted median of the tie: each value holds exactly half the weight, so the mean.
TIE_MEDIAN = (TIE_MAX + 2000) // 2


def _tie_item(swarm: Swarm, attester: str) -> list[VerdictItem]:
    value, flag = TIE_VOTES[attester]
    checked = 8
    return [
        VerdictItem(
            subject=swarm.address("sam"),
            checked=checked,
            agreed=checked - 1 if flag else checked,
            verified_reward_sum=value,
        )
    ]


def play_tie(
    chain: ChainControl,
    client_for: Callable[..., CoordinatorClient],
    accounts: Sequence[LocalAccount],
) -> Swarm:
    """Round t: sam claims the batch maximum (16,000) and oli one more; t is sealed, and ann
    agrees with sam's batch (16,000) while flo flags it (2,000), 1 ETH of weight each; the reveal
    phase ends (``settle_tie`` settles it)."""
    clients = {}
    for name, account in zip(TIE_NAMES, accounts, strict=False):
        clients[name] = client_for(account)
        clients[name].register(name, ETHER)
    swarm = Swarm(round=chain.current_round() + 1, clients=clients)
    t = swarm.round
    chain.warp_to_round(t)
    for name, claim in TIE_CLAIMS.items():
        clients[name].publish_rollouts(t, digest(name, t), 4, 16, claim)
    chain.warp_to_round(t + 3)
    clients["oli"].seal_round(t)
    for attester in TIE_VOTES:
        salt = swarm.salts.setdefault((attester, 0), new_salt())
        items = _tie_item(swarm, attester)
        commitment = ballot_commitment(swarm.address(attester), t, items, salt)
        clients[attester].commit_verdicts(t, commitment)
    chain.warp_to_round(t + 5)
    for attester in TIE_VOTES:
        clients[attester].reveal_verdicts(t, _tie_item(swarm, attester), swarm.salts[(attester, 0)])
    chain.warp_to_round(t + 7)
    return swarm


def settle_tie(swarm: Swarm) -> None:
    """Settles sam's batch (a tie: Inconclusive, nobody slashed) and resolves flo's flag (its bond
    comes back: FlagResolved(upheld = false, amount = 0))."""
    t, oli = swarm.round, swarm.clients["oli"]
    oli.settle(t, swarm.address("sam"))
    oli.resolve_flag(t, swarm.address("sam"), swarm.address("flo"))
