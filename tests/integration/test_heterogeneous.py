"""A swarm of two models with different tokenizers (in-process exchange, lockstep, nodes batched
per shared base model): since ``swarm.rollouts/3`` a node judges and trains on the batches of the
base model it holds only (it could not recompute another model's samples), and skips the others'
as ``unknown_model``: never flagged, never trained on.

Default run: the tiny Llama over the shipped SmolLM2 tokenizer beside a tiny Llama over an
unrelated word-level tokenizer. Slow run (``-m slow``): the shipped SmolLM2 itself beside the
word-level tiny model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from node.config import with_overrides
from node.policy.adapters import AdapterPool
from node.policy.model import BaseModel, load_base, tiny_model
from node.rollouts.codec import decode_batch
from node.round.factory import build_node
from node.round.inprocess import InProcessSwarm
from node.round.lockstep import run_lockstep
from tests.integration.swarm import TEST_NODE, AnsweringLearner
from tests.policy.test_trained_ids import word_level_tokenizer

#: The in-process swarms' batch shape: the test nodes' (the test chain's rules too).
SHAPE = TEST_NODE.batch_shape()

ROUNDS = 2


def _run_mixed_swarm(first: BaseModel, tmp_path: Path) -> None:
    words = word_level_tokenizer()
    second = BaseModel(
        name="tiny-words", model=tiny_model(words, seed=1).eval().requires_grad_(False),
        tokenizer=words,
    )  # fmt: skip
    pools = [AdapterPool(first), AdapterPool(first), AdapterPool(second)]
    pools[1] = pools[0]  # two nodes share the first base, the third has its own
    swarm = InProcessSwarm(InProcessSwarm.genesis_seed_for(7), round=3, shape=SHAPE)
    config = with_overrides(TEST_NODE, {"sampling": {"local_groups": 1, "external_groups": 4}})
    accounts = [Account.from_key(bytes([i + 1]) * 32) for i in range(3)]
    nodes = [
        build_node(
            with_overrides(config, {"model": {"checkpoint_dir": tmp_path / f"n{i}"}}),
            account, swarm.exchange(), pool=pool, name=f"n{i}", learner_class=AnsweringLearner,
        )  # fmt: skip
        for i, (account, pool) in enumerate(zip(accounts, pools, strict=True))
    ]
    reports = run_lockstep(nodes, ROUNDS, swarm.advance)

    assert len(reports) == 3 * ROUNDS
    models = {}
    for round_, peers in swarm.published.items():
        for peer, commitment in peers.items():
            models[peer] = decode_batch(swarm.store.get(commitment.digest)).body.model.name
    assert models[nodes[2].address] == "tiny-words"
    assert models[nodes[0].address] == models[nodes[1].address] == first.name != "tiny-words"
    same_model = {
        nodes[0].address: {nodes[1].address},
        nodes[1].address: {nodes[0].address},
        nodes[2].address: set(),
    }
    for report in reports:
        skipped = len(swarm.members) - 1 - len(same_model[report.peer])
        assert report.rejections == ({"unknown_model": skipped} if skipped else {})
        assert report.flagged == 0 and report.trained
        assert set(report.external_from) <= same_model[report.peer]
    for node in nodes[:2]:  # the two nodes of one base learn from each other
        learned_from = set().union(*(r.external_from for r in reports if r.peer == node.address))
        assert learned_from == same_model[node.address], node.address


def test_two_models_judge_and_train_only_on_their_own_model_s_batches(tiny_base: BaseModel, tmp_path: Path) -> None:
    first = BaseModel(
        name="tiny", model=tiny_model(tiny_base.tokenizer, seed=0).eval().requires_grad_(False),
        tokenizer=tiny_base.tokenizer,
    )  # fmt: skip
    _run_mixed_swarm(first, tmp_path)


@pytest.mark.slow
def test_smollm2_and_a_word_level_model_judge_only_their_own_model_s_batches(tmp_path: Path) -> None:
    _run_mixed_swarm(load_base("smollm2-135m"), tmp_path)
