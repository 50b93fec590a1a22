"""Each round a node stores the adapter it sampled with, names it in its batch, and lets it go once
the batch can no longer be judged (in process: real tiny learners, the memory store, lockstep)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from eth_account import Account  # noqa: E402

from node.config import with_overrides  # noqa: E402
from node.policy.adapters import AdapterPool  # noqa: E402
from node.policy.model import BaseModel  # noqa: E402
from node.provenance.publish import fetch_adapter  # noqa: E402
from node.rollouts import decode_batch  # noqa: E402
from node.round.factory import build_node  # noqa: E402
from node.round.injudging import PHASES  # noqa: E402
from node.round.inprocess import InProcessSwarm  # noqa: E402
from node.round.lockstep import run_lockstep  # noqa: E402
from tests.integration.swarm import TEST_NODE, AnsweringLearner  # noqa: E402

START = 3


def test_adapters_are_named_stored_and_released_after_the_judging_window(
    tiny_base: BaseModel, tmp_path: Path
) -> None:
    pool = AdapterPool(BaseModel(tiny_base.name, tiny_base.model, tiny_base.tokenizer))
    swarm = InProcessSwarm(InProcessSwarm.genesis_seed_for(5), round=START, shape=TEST_NODE.batch_shape())
    nodes = [
        build_node(
            with_overrides(TEST_NODE, {"model": {"checkpoint_dir": tmp_path / f"n{i}"}}),
            Account.from_key(bytes([i + 1]) * 32),
            swarm.exchange(),
            pool=pool,
            name=f"n{i}",
            learner_class=AnsweringLearner,
        )
        for i in range(2)
    ]
    window = PHASES.judging_rounds
    by_address = {node.address: node for node in nodes}
    named: dict[tuple[int, str], bytes] = {}

    def check_the_new_batch(report) -> None:  # type: ignore[no-untyped-def]
        node = by_address[report.peer]
        record = node.state.batches[report.round]
        body = decode_batch(swarm.store.get(record.digest)).body
        assert record.adapter is not None and body.model.adapter == "0x" + record.adapter.hex()
        assert body.model.base == node.learner.base_digest and body.model.lora.rank == 16
        assert set(fetch_adapter(swarm.store, record.adapter)) == set(node.learner.adapter_state())
        named[(report.round, report.peer)] = record.adapter

    rounds = window + 3
    run_lockstep(nodes, rounds, swarm.advance, on_report=check_the_new_batch)
    last = START + rounds - 1

    assert len(named) == 2 * rounds
    assert len(set(named.values())) == len(named)  # every node and round its own adapter
    for (round, _), address in named.items():
        # kept while the batch can be judged (the node's last finish was round ``last``)
        assert swarm.store.has(address) == (round >= last - window), round
