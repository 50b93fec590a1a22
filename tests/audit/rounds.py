"""Real rounds for the audit tests: four peers publish real signed batches (tasks derived from the
chain's round seed, every completion scored) into a real local-folder store, and a committee
judges them by commit-reveal with the verdicts a node's intake computes.

carol may cheat: her first group's completions all claim reward 1.0 (the batch is re-signed and
committed with the inflated reward sum), so a verifier finds some of her claims wrong.

The batches name the tiny model's weights (``swarm audit`` loads it: ``[model] source = "tiny"``).
Written by hand, they name an adapter nobody stored, so their recompute finds ``adapter_missing``;
a peer in ``sampled`` instead samples its batch with a real adapter over the tiny model and stores
it, and a peer in ``forged`` stores that adapter but publishes the hand-written texts under it.
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
from node.policy.adapters import AdapterPool, base_weights
from node.policy.generation import SamplingConfig
from node.policy.grpo import GRPOConfig
from node.policy.model import load_base
from node.provenance.adapter import weights_digest
from node.provenance.publish import publish_adapter
from node.provenance.seeds import batch_seeds
from node.rollouts import Group, encode_batch, sign_batch
from node.rollouts.assemble import assemble_batch
from node.rollouts.schema import ModelInfo
from node.round.learner import Learner, LearnerSettings
from node.sampling.intake import intake_round
from node.sampling.verify import RoundContext
from node.storage import LocalStore
from node.tasks import DEFAULT_PRESET_NAME, derive_tasks, get_preset
from tests.chain_fixtures import TEST_CONFIG, ChainControl
from tests.provenance.helpers import learner_model
from tests.rollouts.factories import model_info
from tests.sampling.batches import TOKENS, stopped

ETHER = 10**18
NAMES = ("alice", "bob", "carol", "dave")
#: The tiny model ``swarm audit`` loads here (``[model] source = "tiny"``), and its weights
#: digest: the audit judges the batches of that digest only.
TINY = load_base("tiny")
TINY_BASE = "0x" + weights_digest(base_weights(TINY.model)).hex()
MODEL = model_info(TOKENS.digest, base=TINY_BASE, name="tiny")
SAMPLING = LearnerSettings(
    sampling=SamplingConfig(max_new_tokens=8), grpo=GRPOConfig(max_completion_tokens=8)
)
#: The base models the verifier here holds: the one MODEL names.
BASES = frozenset({TINY_BASE})
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


def publish_all(
    swarm: AuditSwarm,
    *,
    cheater: str | None = None,
    sampled: Sequence[str] = (),
    forged: Sequence[str] = (),
) -> None:
    """Every peer stores and publishes its batch of the round (``cheater`` inflates rewards;
    ``sampled`` and ``forged``: see the module docstring)."""
    for name, client in swarm.clients.items():
        account = swarm.accounts[name]
        round_seed = client.round_seed(swarm.round)
        tasks = derive_tasks(round_seed, account.address, get_preset(DEFAULT_PRESET_NAME))[
            :TASKS_PER_ROUND
        ]
        model, samples = MODEL, [stopped(texts_for(task.answer)) for task in tasks]
        if name in sampled or name in forged:
            learner = Learner(AdapterPool(TINY), name, TINY.tokenizer, SAMPLING, owner=account.address)
            model = _stored_model(swarm.store, learner)
            if name in sampled:
                seeds = batch_seeds(round_seed, account.address, [t.index for t in tasks], GROUP_SIZE)
                samples = [g.completions for g in learner.generate(tasks, GROUP_SIZE, seeds=seeds)]
        encoded = assemble_batch(
            account=account,
            domain=client.domain,
            round=swarm.round,
            preset=DEFAULT_PRESET_NAME,
            model=model,
            tasks=tasks,
            samples=samples,
        )
        data, reward_sum = encoded.data, encoded.reward_sum_milli
        if name == cheater:
            data, reward_sum = _inflated(encoded.batch, account, client)
        digest = swarm.store.put(data)
        client.publish_rollouts(
            swarm.round, digest, encoded.groups, encoded.completions, reward_sum
        )


def _stored_model(store: LocalStore, learner: Learner) -> ModelInfo:
    """The model record of ``learner``'s adapter, stored (pinned) in ``store``."""
    return learner_model(learner, publish_adapter(store, learner.adapter_state()))


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
