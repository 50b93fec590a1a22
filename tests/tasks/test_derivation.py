"""Task derivation: docs/PROTOCOL.md's item seeds byte for byte, the weighted draw, determinism across
processes, the shipped presets' items, and the verifier's exact comparison."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from eth_utils import keccak

from node.chain.rounds import round_seed
from node.tasks import (
    PRESETS,
    InvalidTaskInput,
    Preset,
    PresetEntry,
    TaskError,
    check_task_matches,
    derive_item_seed,
    derive_tasks,
    draw_entry,
    get_preset,
    peer_specialty,
)
from node.tasks.derivation import DRAW_DOMAIN

REPO_ROOT = Path(__file__).resolve().parents[2]
ROUND_SEED = keccak(b"swarm test round seed")
PEER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OTHER_PEER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

# Golden values for reasoning-gym 0.1.25 (generator_id): if a new version generates other items,
# these change, and so must the generator id named in batches.
GOLDEN_SEEDS = {0: 2489422214793877456, 7: 5666544165239865240}
GOLDEN_TASKS = {
    "smol-easy": "f5d9f6786ff0607f90b9c21fbfdbc9616147b2b0627215187c5c7440ad6b18b8",
    "paper": "bff94e8deb70c51a5a90540f40846364743361c9e7f1e3d6cc2b22bb187245b4",
}


def tasks_digest(round_seed_: bytes, peer: str, preset_name: str) -> str:
    tasks = derive_tasks(round_seed_, peer, get_preset(preset_name))
    body = json.dumps([t.batch_task() for t in tasks], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


# --- item seeds -------------------------------------------------------------------------------


def independent_seed(round_seed_: bytes, peer: str, index: int) -> int:
    """docs/PROTOCOL.md, written out by hand: keccak256(roundSeed ‖ P (20 bytes) ‖ uint32_be(i))."""
    address = bytes.fromhex(peer[2:].lower())
    assert len(round_seed_) == 32 and len(address) == 20
    data = (
        round_seed_
        + address
        + bytes([index >> 24, (index >> 16) & 255, (index >> 8) & 255, index & 255])
    )
    assert len(data) == 56
    digest = keccak(data)
    value = 0
    for byte in digest[:8]:
        value = value * 256 + byte
    return value


@pytest.mark.parametrize("index", [0, 1, 7, 63, 256, 2**32 - 1])
@pytest.mark.parametrize("peer", [PEER, OTHER_PEER, "0x" + "00" * 20, "0x" + "ff" * 20])
def test_item_seed_matches_protocol(peer: str, index: int) -> None:
    for r in (0, 1, 2**64 - 1):
        seed = round_seed(b"\x42" * 32, r)
        assert derive_item_seed(seed, peer, index) == independent_seed(seed, peer, index)


def test_item_seed_golden_values() -> None:
    for index, expected in GOLDEN_SEEDS.items():
        assert derive_item_seed(ROUND_SEED, PEER, index) == expected


def test_address_case_does_not_matter_but_a_bad_checksum_does() -> None:
    seed = derive_item_seed(ROUND_SEED, PEER, 3)
    assert derive_item_seed(ROUND_SEED, PEER.lower(), 3) == seed
    assert derive_item_seed(ROUND_SEED, "0x" + PEER[2:].upper(), 3) == seed
    broken = PEER.replace("Fb", "fb")  # same bytes, mixed case, wrong EIP-55 checksum
    assert broken.lower() == PEER.lower() and broken != PEER
    with pytest.raises(InvalidTaskInput, match="checksum"):
        derive_item_seed(ROUND_SEED, broken, 3)


@pytest.mark.parametrize(
    ("round_seed_", "peer", "index"),
    [
        (b"\x00" * 31, PEER, 0),
        ("00" * 32, PEER, 0),
        (ROUND_SEED, PEER[2:], 0),
        (ROUND_SEED, PEER + "00", 0),
        (ROUND_SEED, bytes(20), 0),
        (ROUND_SEED, PEER, -1),
        (ROUND_SEED, PEER, 2**32),
        (ROUND_SEED, PEER, True),
    ],
)
def test_out_of_range_inputs_are_rejected(round_seed_: object, peer: object, index: object) -> None:
    with pytest.raises(InvalidTaskInput) as info:
        derive_item_seed(round_seed_, peer, index)  # type: ignore[arg-type]
    assert isinstance(info.value, TaskError) and isinstance(info.value, ValueError)


# --- the weighted draw ------------------------------------------------------------------------


def independent_draw(weights: list[float], seed: int) -> int:
    draw = int.from_bytes(keccak(b"swarm.tasks/draw/1" + seed.to_bytes(8, "big"))[:8], "big")
    u = (draw >> 11) / 2**53
    total = 0.0
    for w in weights:
        total += w
    cumulative = 0.0
    for j, w in enumerate(weights):
        cumulative += w
        if u * total < cumulative:
            return j
    return len(weights) - 1


def weighted(weights: list[float]) -> Preset:
    entries = tuple(
        PresetEntry(
            dataset="basic_arithmetic", weight=w, config={"min_digits": 1 + j % 4, "max_digits": 4}
        )
        for j, w in enumerate(weights)
    )
    return Preset(name="weighted", tasks_per_round=64, entries=entries)


def test_draw_matches_its_documented_definition() -> None:
    assert DRAW_DOMAIN == b"swarm.tasks/draw/1"
    weights = [0.5, 3.0, 1.25, 0.25]
    preset = weighted(weights)
    for i in range(2000):
        seed = derive_item_seed(ROUND_SEED, PEER, i)
        assert draw_entry(preset, seed) == independent_draw(weights, seed)
    assert draw_entry(preset, 0) == independent_draw(weights, 0)
    assert draw_entry(preset, 2**64 - 1) == independent_draw(weights, 2**64 - 1)
    with pytest.raises(InvalidTaskInput):
        draw_entry(preset, 2**64)


def test_weights_are_respected() -> None:
    weights = [2.0, 1.0, 1.0, 4.0]
    preset = weighted(weights)
    n = 40_000
    counts = Counter(draw_entry(preset, derive_item_seed(ROUND_SEED, PEER, i)) for i in range(n))
    for j, p in enumerate(preset.probabilities()):
        sigma = (p * (1 - p) / n) ** 0.5
        assert abs(counts[j] / n - p) < 5 * sigma, (j, counts[j] / n, p)


def test_derived_items_follow_the_weights() -> None:
    preset = get_preset("smol-easy")
    counts: Counter[str] = Counter()
    n = 0
    for k in range(150):
        for task in derive_tasks(round_seed(b"\x07" * 32, k), PEER, preset):
            counts[json.dumps(task.config, sort_keys=True)] += 1
            n += 1
    for entry, p in zip(preset.entries, preset.probabilities(), strict=True):
        share = counts[json.dumps(entry.config, sort_keys=True)] / n
        assert abs(share - p) < 5 * (p * (1 - p) / n) ** 0.5


def test_dataset_draw_is_independent_of_the_item() -> None:
    # With random.Random(seed_i) for the draw, paper's basic_arithmetic always had 2 terms.
    paper = get_preset("paper")
    terms = Counter()
    for k in range(60):
        for task in derive_tasks(round_seed(b"\x09" * 32, k), PEER, paper):
            if task.dataset == "basic_arithmetic":
                terms[task.metadata["num_terms"]] += 1
    assert len(terms) >= 4, terms


# --- determinism ------------------------------------------------------------------------------


def test_same_inputs_same_tasks_other_inputs_other_tasks() -> None:
    for preset in PRESETS.values():
        first = derive_tasks(ROUND_SEED, PEER, preset)
        assert derive_tasks(ROUND_SEED, PEER.lower(), preset) == first
        assert len(first) == preset.tasks_per_round
        assert [t.index for t in first] == list(range(preset.tasks_per_round))
        assert [t.seed for t in first] == [
            derive_item_seed(ROUND_SEED, PEER, i) for i in range(preset.tasks_per_round)
        ]
        other_peer = derive_tasks(ROUND_SEED, OTHER_PEER, preset)
        other_round = derive_tasks(keccak(ROUND_SEED), PEER, preset)
        assert [t.question for t in other_peer] != [t.question for t in first]
        assert [t.question for t in other_round] != [t.question for t in first]


def test_golden_tasks() -> None:
    for name, expected in GOLDEN_TASKS.items():
        assert tasks_digest(ROUND_SEED, PEER, name) == expected, name


def test_the_scoring_rule_changes_no_task() -> None:
    """``scoring`` is local: a strict twin of a preset derives the same items, golden digest too."""
    for name, expected in GOLDEN_TASKS.items():
        loose = get_preset(name)
        strict = Preset(
            name=f"{name}-strict",
            tasks_per_round=loose.tasks_per_round,
            entries=loose.entries,
            scoring="strict",
        )
        tasks = derive_tasks(ROUND_SEED, PEER, strict)
        assert {t.scoring for t in tasks} == {"strict"}
        assert [t.seed for t in tasks] == [t.seed for t in derive_tasks(ROUND_SEED, PEER, loose)]
        body = json.dumps([t.batch_task() for t in tasks], sort_keys=True)
        assert hashlib.sha256(body.encode()).hexdigest() == expected, name


def test_other_process_with_other_hash_seed_derives_the_same_tasks() -> None:
    code = (
        "import json, sys\n"
        "from tests.tasks.test_derivation import tasks_digest\n"
        "rs = bytes.fromhex(sys.argv[1])\n"
        "print(json.dumps({n: tasks_digest(rs, sys.argv[2], n) for n in sys.argv[3:]}))\n"
    )
    rs = round_seed(b"\x11" * 32, 12345)
    names = sorted(PRESETS)
    here = {n: tasks_digest(rs, OTHER_PEER, n) for n in names}
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", code, rs.hex(), OTHER_PEER, *names],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            cwd=REPO_ROOT,
        )
        assert json.loads(result.stdout.strip().splitlines()[-1]) == here


def test_generation_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    derive_tasks(ROUND_SEED, PEER, get_preset("paper"))  # bf's compiler prints dots
    assert capfd.readouterr().out == ""


# --- the shipped presets ----------------------------------------------------------------------


def test_paper_preset_yields_valid_items_from_all_nine_datasets() -> None:
    paper = get_preset("paper")
    seen: dict[str, int] = Counter()
    for k in range(30):
        for task in derive_tasks(round_seed(b"\x05" * 32, k), PEER, paper):
            seen[task.dataset] += 1
            assert task.question.strip()
            assert task.answer is None or task.answer.strip()
            assert task.answer is not None or task.dataset == "propositional_logic"
            assert task.metadata["source_dataset"] == task.dataset
    assert set(seen) == {e.dataset for e in paper.entries}


def test_smol_easy_items_are_two_term_sums_and_differences() -> None:
    for k in range(20):
        for task in derive_tasks(round_seed(b"\x06" * 32, k), PEER, get_preset("smol-easy")):
            expression = task.metadata["expression"]
            a, op, b = expression.split(" ")
            assert op in "+-" and op in task.config["operators"]
            digits = task.config["max_digits"]
            assert 0 <= int(a) <= 10**digits and 0 <= int(b) <= 10**digits
            assert task.question == f"Calculate {expression}."
            assert int(task.answer) == (int(a) + int(b) if op == "+" else int(a) - int(b))


def test_derivation_is_fast() -> None:
    peers = [f"0x{k:040x}" for k in range(1, 41)]
    for preset in PRESETS.values():
        big = preset.model_copy(update={"tasks_per_round": 64})
        start = time.perf_counter()
        count = sum(len(derive_tasks(ROUND_SEED, peer, big)) for peer in peers)
        elapsed = time.perf_counter() - start
        assert count == 64 * len(peers)
        assert count / elapsed > 1000, f"{preset.name}: {count / elapsed:.0f} tasks/s"


# --- the verifier's comparison ----------------------------------------------------------------


def test_check_task_matches_is_exact() -> None:
    paper = get_preset("paper")
    tasks = derive_tasks(ROUND_SEED, PEER, paper) + derive_tasks(keccak(b"x"), PEER, paper)
    for task in tasks:
        assert check_task_matches(task, task.question, task.answer)
        assert not check_task_matches(task, task.question + " ", task.answer)
        assert not check_task_matches(task, task.question, (task.answer or "") + "0")
        assert not check_task_matches(task, task.question.encode(), task.answer)
        assert not check_task_matches(task, task.question, 7)
        if task.answer is not None:
            assert not check_task_matches(task, task.question, None)
            assert not check_task_matches(task, task.question, task.answer.upper() + "x")
        else:
            assert not check_task_matches(task, task.question, "")
    assert any(t.answer is None for t in tasks)


def test_batch_task_holds_only_the_public_fields() -> None:
    task = derive_tasks(ROUND_SEED, PEER, get_preset("smol-easy"))[2]
    assert task.batch_task() == {
        "dataset": "basic_arithmetic",
        "index": 2,
        "question": task.question,
        "answer": task.answer,
    }
    assert task.entry() == {
        "question": task.question,
        "answer": task.answer,
        "metadata": task.metadata,
    }


# --- specialties ------------------------------------------------------------------------------


def specialised(specialties: tuple[tuple[float, ...], ...]) -> Preset:
    """Two entries (one-digit addition, one-digit subtraction) and the given specialties."""
    entries = tuple(
        PresetEntry(
            dataset="basic_arithmetic",
            weight=1.0,
            config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1,
                    "operators": [op], "allow_parentheses": False, "allow_negation": False},
        )  # fmt: skip
        for op in ("+", "-")
    )
    return Preset(name="specialised", tasks_per_round=16, entries=entries, specialties=specialties)


def independent_specialty(peer: str, count: int) -> int:
    """docs/PROTOCOL.md by hand: uint64(keccak256("swarm.tasks/specialty/1" ‖ P)[:8]) mod count."""
    digest = keccak(b"swarm.tasks/specialty/1" + bytes.fromhex(peer[2:].lower()))
    return int.from_bytes(digest[:8], "big") % count


def test_a_peers_specialty_is_fixed_by_its_address() -> None:
    preset = specialised(((1.0, 0.0), (0.0, 1.0), (1.0, 1.0)))
    peers = [PEER, OTHER_PEER] + ["0x" + f"{i:040x}" for i in range(1, 40)]
    for peer in peers:
        assert peer_specialty(preset, peer) == independent_specialty(peer, 3)
    assert {peer_specialty(preset, p) for p in peers} == {0, 1, 2}
    assert peer_specialty(get_preset("smol-strict"), PEER) is None  # no specialties


def test_a_specialists_tasks_are_drawn_with_its_specialtys_weights() -> None:
    preset = specialised(((1.0, 0.0), (0.0, 1.0)))
    peers = ["0x" + f"{i:040x}" for i in range(1, 12)]
    for peer in peers:
        operator = "+" if peer_specialty(preset, peer) == 0 else "-"
        tasks = derive_tasks(ROUND_SEED, peer, preset)
        assert all(f" {operator} " in t.question for t in tasks), (peer, operator)
    # the held-out set and any draw without a peer use the entries' own weights
    seeds = [derive_item_seed(ROUND_SEED, PEER, i) for i in range(200)]
    assert {draw_entry(preset, s) for s in seeds} == {0, 1}
    assert {draw_entry(preset, s, 1) for s in seeds} == {1}


@pytest.mark.parametrize(
    ("specialties", "message"),
    [
        (((1.0,),), "1 weights for 2 entries"),
        (((1.0, -0.5),), "finite and >= 0"),
        (((1.0, float("nan")),), "finite and >= 0"),
        (((0.0, 0.0),), "positive, finite sum"),
        (((1e308, 1e308),), "positive, finite sum"),
        (((1.0, 1.0),) * 65, "at most 64"),
    ],
)
def test_bad_specialties_are_refused(specialties: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        specialised(specialties)
