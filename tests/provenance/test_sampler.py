"""The seeded sampler swarm.sample/1: seeds and uniforms from public values, the pick, margins."""

from __future__ import annotations

import math

import pytest
import torch
from eth_utils import keccak, to_canonical_address

from node.provenance.sampler import pick_checks, pick_margins, seeded_pick
from node.provenance.seeds import batch_seeds, completion_seed, local_seeds, uniform, uniforms
from tests.docs.protocol_vectors import PROTOCOL_PATH, read_vectors

PEER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
ROUND_SEED = bytes(range(32))


def test_a_completion_seed_is_the_keccak_of_its_public_values() -> None:
    expected = keccak(
        b"swarm.sample/1" + ROUND_SEED + to_canonical_address(PEER) + (3).to_bytes(4, "big")
        + (5).to_bytes(4, "big")
    )
    assert completion_seed(ROUND_SEED, PEER, 3, 5) == expected
    assert completion_seed(ROUND_SEED, PEER.lower(), 3, 5) == expected  # the address, not its case
    seeds = batch_seeds(ROUND_SEED, PEER, [0, 3], 8)
    assert seeds[1][5] == expected and len({s for row in seeds for s in row}) == 16


def test_a_uniform_is_53_bits_of_the_position_s_keccak() -> None:
    seed = completion_seed(ROUND_SEED, PEER, 0, 0)
    word = int.from_bytes(keccak(seed + (7).to_bytes(4, "big"))[:8], "big")
    assert uniform(seed, 7) == (word >> 11) / 2**53
    values = uniforms(seed, 2000)
    assert all(0 <= u < 1 for u in values) and len(set(values)) == 2000
    assert abs(sum(values) / len(values) - 0.5) < 0.03  # 2000 draws: sd of the mean 0.0065


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: completion_seed(b"short", PEER, 0, 0), "round seed must be 32 bytes"),
        (lambda: completion_seed(ROUND_SEED, "0x12", 0, 0), "20-byte hex address"),
        (lambda: completion_seed(ROUND_SEED, PEER, -1, 0), "task index must be a uint32"),
        (lambda: completion_seed(ROUND_SEED, PEER, 0, 2**32), "completion index must be a uint32"),
        (lambda: uniform(b"\x00" * 31, 0), "completion seed must be 32 bytes"),
        (lambda: local_seeds(-1, 1, 1), "uint64"),
    ],
)
def test_bad_inputs_are_refused_with_what_was_wrong(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        call()


def test_local_seeds_never_equal_a_batch_s() -> None:
    local = {s for row in local_seeds(0, 4, 8) for s in row}
    assert len(local) == 32 and local == {s for row in local_seeds(0, 4, 8) for s in row}
    assert not local & {s for row in batch_seeds(bytes(32), PEER, range(4), 8) for s in row}


# ---------------------------------------------------------------- the pick and its margins

PROBS = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
LOGITS = PROBS.log().float()[None, :]  # (1, 4)


@pytest.mark.parametrize(
    ("u", "token"), [(0.0, 0), (0.0999, 0), (0.1001, 1), (0.2999, 1), (0.3001, 2), (0.61, 3), (0.9999, 3)]
)
def test_the_pick_is_the_first_token_whose_cumulative_probability_exceeds_u(
    u: float, token: int
) -> None:
    tokens, logprobs = seeded_pick(LOGITS, torch.tensor([u]))
    assert int(tokens[0]) == token
    assert float(logprobs[0]) == pytest.approx(math.log(float(PROBS[token])), abs=1e-6)


def test_picks_follow_the_distribution() -> None:
    """u on an even grid: each token is picked in proportion to its probability (within 1/n)."""
    n = 1000
    logits = torch.randn(1, 50, generator=torch.Generator().manual_seed(0)) * 2
    u = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    tokens, _ = seeded_pick(logits.expand(n, -1), u)
    counts = torch.bincount(tokens, minlength=50).double() / n
    assert torch.allclose(counts, torch.softmax(logits[0].double(), -1), atol=1.5 / n)


def test_a_token_without_weight_is_never_picked() -> None:
    logits = torch.tensor([[0.0, -2000.0, 0.0, -2000.0]])  # tokens 1 and 3: exp underflows to 0
    for u in (0.0, 0.4999999, 0.5, 0.9999999999, 1 - 2**-53):
        (token,), _ = seeded_pick(logits, torch.tensor([u]))
        assert int(token) in (0, 2)


def test_margins_are_the_distance_to_the_claimed_token_s_interval() -> None:
    u = torch.tensor([0.25, 0.25, 0.25, 0.95], dtype=torch.float64)
    logits = LOGITS.expand(4, -1)
    margins = pick_margins(logits, torch.tensor([1, 0, 3, 3]), u)
    # intervals: 0 [0, .1), 1 [.1, .3), 2 [.3, .6), 3 [.6, 1)
    assert margins.tolist() == pytest.approx([0.05, -0.15, -0.35, 0.05], abs=1e-7)
    picked, _ = seeded_pick(logits, u)
    assert (pick_margins(logits, picked, u) >= 0).all()


def test_the_margins_pass_also_gives_each_claimed_token_s_log_prob() -> None:
    u = torch.tensor([0.25, 0.25, 0.95], dtype=torch.float64)
    logits = LOGITS.expand(3, -1)
    tokens = torch.tensor([1, 0, 3])
    margins, logprobs = pick_checks(logits, tokens, u)
    assert torch.equal(margins, pick_margins(logits, tokens, u))
    # intervals 0 [0, .1), 1 [.1, .3), 3 [.6, 1): probabilities 0.2, 0.1, 0.4
    assert logprobs.tolist() == pytest.approx([math.log(0.2), math.log(0.1), math.log(0.4)])
    _, sampled = seeded_pick(logits, u)  # the sampler's own log-prob of its pick agrees
    assert float(sampled[2]) == pytest.approx(float(logprobs[2]), abs=1e-6)


def test_temperature_and_top_p_shape_the_distribution_the_pick_reads() -> None:
    u = torch.tensor([0.5])
    (cold,), _ = seeded_pick(LOGITS, u, temperature=0.05)  # nearly greedy
    (nucleus,), _ = seeded_pick(LOGITS, torch.tensor([0.0]), top_p=0.5)  # tokens 3 and 2 stay
    (tiny,), _ = seeded_pick(LOGITS, torch.tensor([0.0]), top_p=1e-6)  # the top one alone
    assert (int(cold), int(nucleus), int(tiny)) == (3, 2, 3)


def test_the_node_s_sampler_agrees_with_the_spec_s_vector() -> None:
    """docs/PROTOCOL.md's sample-seeds and sample-pick vectors, recomputed by the torch sampler."""
    vectors = read_vectors(PROTOCOL_PATH.read_text())
    seeds = vectors["sample-seeds"]
    round_seed = bytes.fromhex(seeds["round_seed"][2:])
    first = completion_seed(round_seed, seeds["peer"], seeds["task"], 0)
    assert "0x" + first.hex() == seeds["seeds"][0] and uniforms(first, 4) == seeds["u"]
    picks = vectors["sample-pick"]["picks"]
    logits = torch.tensor([vectors["sample-pick"]["logits"]] * len(picks))
    u = torch.tensor([row["u"] for row in picks], dtype=torch.float64)
    tokens, _ = seeded_pick(logits, u)
    assert tokens.tolist() == [row["token"] for row in picks]
    margins = pick_margins(logits, tokens, u)
    assert margins.tolist() == pytest.approx([row["margin"] for row in picks], abs=1e-12)
