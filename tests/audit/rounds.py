"""Real rounds for the audit tests: four peers publish real signed batches (tasks derived from the
chain's round seed, every completion scored) into a real local-folder store, and a committee
judges them by commit-reveal with the verdicts a node's intake computes.

carol may cheat: her first group's completions all claim reward 1.0 (the batch is re-signed and
committed with the inflated reward sum), so a verifier finds some of her claims wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eth_account.signers.local import LocalAccount

from node.chain.client import CoordinatorClient
from node.chain.committee import ballot_commitment, new_salt, sort_items
from node.chain.events import EventReader, RolloutsPublished
from node.chain.models import VerdictItem
from node.rollouts import Group, encode_batch, sign_batch
from node.rollouts.assemble import assemble_batch
from node.sampling.intake import intake_round
from node.sampling.verify import RoundContext
from node.storage import LocalStore
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset
from tests.chain_fixtures import TEST_CONFIG, ChainControl
from tests.rollouts.factories import model_info
from tests.sampling.batches import TOKENS, stopped

ETHER = 10**18
NAMES = ("alice", "bob", "carol", "dave")
#: The shipped SmolLM2's weights digest (docs/PROTOCOL.md, "Adapter bytes"): ``swarm audit``
#: loads the configured model, the shipped one, and judges the batches of its digest only.
SHIPPED_BASE = "0xb0d59257446a509a01a87d2841247fd2cd9c2a8dea64edd7915f8530085bfaf9"
MODEL = model_info(TOKENS.digest, base=SHIPPED_BASE, name="HuggingFaceTB/SmolLM2-135M-Instruct")
#: The base models the verifier here holds: the one MODEL names.
BASES = frozenset({SHIPPED_BASE})
#: n and G of the rounds here: the test deployment's rules (what ``swarm audit`` checks).
TASKS_PER_ROUND, GROUP_SIZE = TEST_CONFIG.tasks_per_round, TEST_CONFIG.group_size


@dataclass
class AuditSwarm:
    chain: ChainControl
    clients: dict[str, CoordinatorClient]
    accounts: dict[str, LocalAccount]
    store: LocalStore
    round: int = 0
    salts: dict[str, bytes] = field(default_factory=dict)
    items: dict[str, list[VerdictItem]] = field(default_factory=dict)

    def address(self, name: str) -> str:
        return self.accounts[name].address


def start(
    chain: ChainControl,
    client_for: Callable[..., CoordinatorClient],
    accounts: Sequence[LocalAccount],
    store_dir: Path,
) -> AuditSwarm:
    """Registers the four peers (1 ETH each) and moves to the round where their stake counts."""
    clients, named = {}, {}
    for name, account in zip(NAMES, accounts, strict=False):
        clients[name] = client_for(account)
        clients[name].register(name, ETHER)
        named[name] = account
    swarm = AuditSwarm(chain, clients, named, LocalStore(store_dir))
    swarm.round = chain.current_round() + 1
    chain.warp_to_round(swarm.round)
    return swarm


def texts_for(answer: str, size: int = GROUP_SIZE) -> list[str]:
    right = f"Adding up. <answer>{answer}</answer>"
    return [right if i % 2 == 0 else "<answer>-12345</answer>" for i in range(size)]


def publish_all(swarm: AuditSwarm, *, cheater: str | None = None) -> None:
    """Every peer stores and publishes its batch of the round (``cheater`` inflates rewards)."""
    for name, client in swarm.clients.items():
        account = swarm.accounts[name]
        tasks = derive_tasks(
            client.round_seed(swarm.round), account.address, get_preset(DEFAULT_PRESET_NAME)
        )[:TASKS_PER_ROUND]
        encoded = assemble_batch(
            account=account,
            domain=client.domain,
            round=swarm.round,
            preset=DEFAULT_PRESET_NAME,
            model=MODEL,
            tasks=tasks,
            samples=[
                stopped(texts_for(task.answer)) for task in tasks
            ],
        )
        data, reward_sum = encoded.data, encoded.reward_sum_milli
        if name == cheater:
            data, reward_sum = _inflated(encoded.batch, account, client)
        digest = swarm.store.put(data)
        client.publish_rollouts(
            swarm.round, digest, encoded.groups, encoded.completions, reward_sum
        )


def _inflated(batch, account: LocalAccount, client: CoordinatorClient) -> tuple[bytes, int]:
    groups = list(batch.body.groups)
    first = groups[0]
    groups[0] = Group(
        task=first.task,
        completions=[c.model_copy(update={"reward": 1.0}) for c in first.completions],
    )
    body = batch.body.model_copy(update={"groups": groups})
    signed = sign_batch(body, account, client.domain)
    return encode_batch(signed), signed.body.reward_sum_milli


def node_items(swarm: AuditSwarm, attester: str) -> list[VerdictItem]:
    """The ballot a node's intake computes for ``attester`` (every other peer's batch)."""
    client = swarm.clients[attester]
    events = EventReader(client.w3, client.address).read(
        0, client.block_number(), events=[RolloutsPublished], round=swarm.round
    )
    context = RoundContext(
        domain=client.domain,
        round=swarm.round,
        round_seed=client.round_seed(swarm.round),
        tasks_per_round=TASKS_PER_ROUND,
        group_size=GROUP_SIZE,
        tokens=TOKENS,
        bases=BASES,
    )
    report = intake_round(events, swarm.store, context, own_address=swarm.address(attester))
    return report.items()


def judge(swarm: AuditSwarm, ballots: dict[str, list[VerdictItem]]) -> None:
    """Seals the round, commits every ballot, reveals them, and moves past the reveal phase."""
    phases = swarm.clients["alice"].cached_phases
    swarm.chain.warp_to_round(phases.commit_phase(swarm.round).start)
    swarm.clients["alice"].seal_round(swarm.round)
    for name, items in ballots.items():
        swarm.items[name] = sort_items(items)
        swarm.salts[name] = new_salt()
        commitment = ballot_commitment(
            swarm.address(name), swarm.round, swarm.items[name], swarm.salts[name]
        )
        swarm.clients[name].commit_verdicts(swarm.round, commitment)
    swarm.chain.warp_to_round(phases.reveal_phase(swarm.round).start)
    for name in ballots:
        swarm.clients[name].reveal_verdicts(swarm.round, swarm.items[name], swarm.salts[name])
    swarm.chain.warp_to_round(phases.settleable_from(swarm.round))


def agreeing(item: VerdictItem) -> VerdictItem:
    """The same verdict turned into an agreement (a lazy or colluding committee member)."""
    return item.model_copy(update={"agreed": item.checked})
