"""Presets: the shipped definitions, validation messages, lookup, and the layer's light imports."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from pydantic import ValidationError

from node.tasks import (
    DEFAULT_PRESET_NAME,
    PRESETS,
    Preset,
    PresetEntry,
    TaskError,
    UnknownPreset,
    generator_id,
    get_preset,
)
from node.tasks.presets import MAX_TASKS_PER_ROUND, PAPER_DATASETS

PAPER_NINE = {
    "basic_arithmetic",
    "base_conversion",
    "fraction_simplification",
    "decimal_arithmetic",
    "calendar_arithmetic",
    "arc_1d",
    "binary_matrix",
    "propositional_logic",
    "bf",
}


def test_shipped_presets() -> None:
    assert set(PRESETS) == {
        "paper", "smol-easy", "paper-strict", "smol-strict", "smol-mix-strict"
    }  # fmt: skip
    assert DEFAULT_PRESET_NAME == "smol-strict"
    assert get_preset(DEFAULT_PRESET_NAME) is PRESETS["smol-strict"]
    assert get_preset(DEFAULT_PRESET_NAME).scoring == "strict"
    for name, preset in PRESETS.items():
        assert preset.name == name
        assert 1 <= preset.tasks_per_round <= MAX_TASKS_PER_ROUND
        assert sum(preset.probabilities()) == pytest.approx(1.0)


def test_paper_preset_is_the_nine_datasets_with_defaults_and_equal_weights() -> None:
    paper = get_preset("paper")
    assert set(PAPER_DATASETS) == PAPER_NINE
    assert [e.dataset for e in paper.entries] == list(PAPER_DATASETS)
    assert all(e.config == {} for e in paper.entries)
    assert len({e.weight for e in paper.entries}) == 1


def test_default_preset_is_easy_two_term_arithmetic() -> None:
    smol = get_preset(DEFAULT_PRESET_NAME)
    for entry in smol.entries:
        assert entry.dataset == "basic_arithmetic"
        assert entry.config["min_terms"] == entry.config["max_terms"] == 2
        assert entry.config["max_digits"] <= 2
        assert entry.config["allow_parentheses"] is False
    one_digit = sum(
        p
        for e, p in zip(smol.entries, smol.probabilities(), strict=True)
        if e.config["max_digits"] == 1
    )
    assert one_digit >= 0.5


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPreset) as info:
        get_preset("paper-v2")
    assert isinstance(info.value, TaskError)
    message = str(info.value)
    assert "'paper-v2'" in message and "paper" in message and "smol-easy" in message
    assert info.value.known == sorted(PRESETS)
    with pytest.raises(UnknownPreset):
        get_preset(None)  # type: ignore[arg-type]


def test_unknown_dataset_is_rejected_with_suggestions() -> None:
    with pytest.raises(
        ValidationError, match=r"unknown dataset 'basic_arithmetc'.*basic_arithmetic"
    ):
        PresetEntry(dataset="basic_arithmetc", weight=1.0)


def test_bad_config_keys_are_rejected_naming_the_allowed_ones() -> None:
    with pytest.raises(ValidationError, match=r"unknown config keys digits;.*max_digits"):
        PresetEntry(dataset="basic_arithmetic", weight=1.0, config={"digits": 2})
    with pytest.raises(ValidationError, match="may not set seed"):
        PresetEntry(dataset="basic_arithmetic", weight=1.0, config={"seed": 3})
    with pytest.raises(ValidationError, match="may not set size"):
        PresetEntry(dataset="bf", weight=1.0, config={"size": 3})


def test_config_values_reasoning_gym_rejects_fail_at_construction() -> None:
    with pytest.raises(ValidationError, match="max_digits must be >= min_digits"):
        PresetEntry(dataset="basic_arithmetic", weight=1, config={"min_digits": 3, "max_digits": 1})
    with pytest.raises(ValidationError, match="unsupported operator"):
        PresetEntry(dataset="basic_arithmetic", weight=1, config={"operators": ["%"]})
    with pytest.raises(ValidationError, match="JSON values only"):
        PresetEntry(dataset="basic_arithmetic", weight=1, config={"operators": {"+"}})


def test_config_is_normalised_to_json() -> None:
    entry = PresetEntry(dataset="basic_arithmetic", weight=1, config={"operators": ("+", "-")})
    assert entry.config == {"operators": ["+", "-"]}


@pytest.mark.parametrize("weight", [0, -1, float("nan"), float("inf")])
def test_weights_must_be_positive_and_finite(weight: float) -> None:
    with pytest.raises(ValidationError, match="weight"):
        PresetEntry(dataset="bf", weight=weight)


def test_preset_shape_is_checked() -> None:
    entry = PresetEntry(dataset="bf", weight=1)
    Preset(name="ok-1.x_y", tasks_per_round=MAX_TASKS_PER_ROUND, entries=(entry,))
    with pytest.raises(ValidationError, match="tasks_per_round"):
        Preset(name="x", tasks_per_round=MAX_TASKS_PER_ROUND + 1, entries=(entry,))
    with pytest.raises(ValidationError, match="tasks_per_round"):
        Preset(name="x", tasks_per_round=0, entries=(entry,))
    with pytest.raises(ValidationError, match="entries"):
        Preset(name="x", tasks_per_round=1, entries=())
    with pytest.raises(ValidationError, match="preset name"):
        Preset(name="Has Space", tasks_per_round=1, entries=(entry,))
    huge = PresetEntry(dataset="bf", weight=1e308)
    with pytest.raises(ValidationError, match="overflows"):
        Preset(name="x", tasks_per_round=1, entries=(huge, huge))


def test_shipped_presets_name_their_scoring_rule() -> None:
    assert {name: p.scoring for name, p in PRESETS.items()} == {
        name: "strict" if name.endswith("-strict") else "dataset" for name in PRESETS
    }
    shape = {"name": "x", "tasks_per_round": 1, "entries": (PresetEntry(dataset="bf", weight=1),)}
    assert Preset(**shape).scoring == "dataset"
    assert Preset(**shape, scoring="strict").scoring == "strict"
    with pytest.raises(ValidationError, match="scoring"):
        Preset(**shape, scoring="lenient")


def test_presets_are_frozen() -> None:
    with pytest.raises(ValidationError):
        PRESETS["paper"].tasks_per_round = 3  # type: ignore[misc]


def test_generator_id_names_the_installed_distribution() -> None:
    assert generator_id() == f"reasoning-gym=={version('reasoning-gym')}"
    assert generator_id() == "reasoning-gym==0.1.25"


def test_the_task_layer_never_imports_the_learning_stack() -> None:
    code = (
        "import sys, pkgutil, importlib, node.tasks as t\n"
        "for m in pkgutil.iter_modules(t.__path__):\n"
        "    importlib.import_module(f'node.tasks.{m.name}')\n"
        "heavy = {'torch', 'transformers', 'peft'}\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in heavy or n == 'node.policy')\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
