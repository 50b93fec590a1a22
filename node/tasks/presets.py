"""Task presets: which reasoning-gym datasets a round's tasks come from, with what weights.

A preset is named in every batch (``tasks.preset``); a verifier must know it by that name and
rejects batches naming one it does not know (docs/PROTOCOL.md, "Presets"). The definitions
below are therefore part of the protocol: change one only together with every node (rename it
when its meaning changes).

Five presets ship:

- ``smol-strict`` (the default): easy ``basic_arithmetic`` settings for the shipped
  SmolLM2-135M-Instruct, under the ``"strict"`` rule (1 only for a completion that stopped right
  after one exact answer). With three format demonstrations the base model scored 0.28 on
  one-digit addition and 0.06 on two-digit addition/subtraction, but ~0.01 on the default
  settings (docs/DESIGN.md); GRPO learns only from groups whose rewards differ, so the mix sits
  where the base model scores between ~5% and ~50%. Only measured kinds of question are in it.
- ``paper-strict``: the nine datasets of the published SAPO experiment with their default configs
  and equal weights, for stronger models, under the ``"strict"`` rule.
- ``smol-mix-strict``: one-digit addition, subtraction and multiplication and three-term
  addition, strict; each peer specialises in one (0.7 of its tasks, 0.1 each of the others,
  fixed by its address), so peers' groups carry practice a node lacks. The base model's strict
  rewards on the four differ (0.05 to 0.22), so an address ground into the easiest specialty
  earns more on the leaderboard: it is a candidate for the experiment, not a testnet preset.
- ``smol-easy`` and ``paper``: the same mixes under the ``"dataset"`` rule (partial credit, text
  after the answer ignored): the rule of protocol v2's long run, kept to compare against it.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from node.rollouts.limits import MAX_COMPLETION_TOKENS
from node.tasks import generator
from node.tasks.errors import UnknownPreset
from node.tasks.safe_scorers import REVIEWED_SCORERS

# docs/PROTOCOL.md limits a batch to 64 groups, one per task.
MAX_TASKS_PER_ROUND = 64
MAX_SPECIALTIES = 64

ScoringRule = Literal["dataset", "strict"]
"""How a completion is scored (docs/PROTOCOL.md, "Scoring"): ``"dataset"``, the dataset scorer on
the extracted answer; ``"strict"``, 1 only for a clean stop after one exact answer, else 0."""

_PRESET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


class PresetEntry(BaseModel):
    """One dataset of a preset: ``create_dataset(dataset, seed=..., size=..., **config)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str = Field(description="reasoning-gym dataset name, e.g. 'basic_arithmetic'")
    weight: float = Field(
        gt=0, allow_inf_nan=False, description="relative draw weight (need not sum to 1)"
    )
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword arguments of the dataset's config, besides seed and size; "
        "JSON values only (tuples become lists)",
    )

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, name: str) -> str:
        if name not in generator.known_datasets():
            close = difflib.get_close_matches(name, generator.known_datasets(), n=3)
            hint = f"; similar: {', '.join(close)}" if close else ""
            raise ValueError(f"unknown dataset {name!r} in {generator.generator_id()}{hint}")
        if name not in REVIEWED_SCORERS:
            raise ValueError(
                f"dataset {name!r} is not allowed: its scorer has not been reviewed for answers "
                "written by other peers (some reasoning-gym scorers eval them); review it and add "
                f"it to node.tasks.safe_scorers. Reviewed: {', '.join(sorted(REVIEWED_SCORERS))}"
            )
        return name

    @field_validator("config")
    @classmethod
    def _json_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        # The config becomes exactly its JSON form (tuples -> lists), which other implementations
        # of the protocol can reproduce and which caches can key on.
        try:
            return json.loads(generator.config_key(config))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"config must hold JSON values only ({exc})") from None

    @model_validator(mode="after")
    def _valid_config(self) -> PresetEntry:
        allowed = generator.config_fields(self.dataset)
        reserved = sorted(generator.RESERVED_CONFIG_KEYS & self.config.keys())
        if reserved:
            raise ValueError(
                f"{self.dataset}: config may not set {', '.join(reserved)} "
                "(task derivation sets seed and size)"
            )
        unknown = sorted(set(self.config) - set(allowed))
        if unknown:
            raise ValueError(
                f"{self.dataset}: unknown config keys {', '.join(unknown)}; "
                f"allowed: {', '.join(allowed)}"
            )
        try:
            generator.generate(self.dataset, self.config, seed=0)
        except Exception as exc:  # AssertionError from the config's validate(), TypeError, ...
            raise ValueError(
                f"{self.dataset}: reasoning-gym rejects config {self.config}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        return self


class Preset(BaseModel):
    """A named task mix: how many tasks a peer derives per round and from which datasets."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="name written in batches; lower-case letters, digits, . _ -")
    tasks_per_round: int = Field(
        ge=1, le=MAX_TASKS_PER_ROUND, description="tasks (groups) per peer per round"
    )
    entries: tuple[PresetEntry, ...] = Field(
        min_length=1, description="datasets, drawn by weight in this order"
    )
    description: str = Field(default="", description="one line for humans")
    scoring: ScoringRule = Field(
        default="dataset", description="the scoring rule of docs/PROTOCOL.md, 'Scoring'"
    )
    max_completion_tokens: int = Field(
        default=512,
        ge=1,
        le=MAX_COMPLETION_TOKENS,
        description="the most token ids a completion may have, its stop token included: a "
        "verifier flags a longer one (too_many_tokens), and a node samples no more",
    )
    specialties: tuple[tuple[float, ...], ...] = Field(
        default=(),
        max_length=MAX_SPECIALTIES,
        description="per-peer weights: a peer draws its tasks with specialty k's weights (one "
        "per entry, in entry order), k fixed by its address (docs/PROTOCOL.md, 'Task "
        "derivation'); empty: every peer draws with the entries' weights",
    )

    @field_validator("name")
    @classmethod
    def _name_shape(cls, name: str) -> str:
        if not _PRESET_NAME.fullmatch(name):
            raise ValueError(
                f"preset name {name!r} must be 1-64 characters of a-z, 0-9, '.', '_', '-', "
                "starting with a letter or digit"
            )
        return name

    @model_validator(mode="after")
    def _finite_total(self) -> Preset:
        if not math.isfinite(self.total_weight):
            raise ValueError(f"preset {self.name!r}: the weights' sum overflows; use smaller ones")
        return self

    @model_validator(mode="after")
    def _specialties_fit_the_entries(self) -> Preset:
        for k, weights in enumerate(self.specialties):
            if len(weights) != len(self.entries):
                raise ValueError(
                    f"preset {self.name!r}: specialty {k} has {len(weights)} weights for "
                    f"{len(self.entries)} entries; give one weight per entry"
                )
            if not all(math.isfinite(w) and w >= 0 for w in weights):
                raise ValueError(
                    f"preset {self.name!r}: specialty {k}'s weights must be finite and >= 0"
                )
            if not 0 < weight_sum(weights) < math.inf:
                raise ValueError(
                    f"preset {self.name!r}: specialty {k}'s weights must have a positive, finite "
                    "sum"
                )
        return self

    @property
    def total_weight(self) -> float:
        """Sum of the entries' weights, added in entry order (the draw depends on that order)."""
        return weight_sum(self.weights())

    def weights(self, specialty: int | None = None) -> tuple[float, ...]:
        """The draw weights of specialty ``specialty``, or the entries' own (None, or a preset
        without specialties)."""
        if specialty is None or not self.specialties:
            return tuple(entry.weight for entry in self.entries)
        return self.specialties[specialty]

    def probabilities(self, specialty: int | None = None) -> list[float]:
        """Each entry's chance of being drawn for one item (of ``specialty``'s peers)."""
        weights = self.weights(specialty)
        total = weight_sum(weights)
        return [w / total for w in weights]


def weight_sum(weights: tuple[float, ...]) -> float:
    """Left-to-right IEEE-754 sum, as the draw adds them."""
    total = 0.0
    for weight in weights:
        total += weight
    return total


def _arith(weight: float, operators: list[str], digits: int) -> PresetEntry:
    """Two-term ``basic_arithmetic`` without parentheses: "Calculate 7 + 3." style questions."""
    return PresetEntry(
        dataset="basic_arithmetic",
        weight=weight,
        config={
            "min_terms": 2,
            "max_terms": 2,
            "min_digits": digits,
            "max_digits": digits,
            "operators": operators,
            "allow_parentheses": False,
            "allow_negation": False,
        },
    )


PAPER_DATASETS = (
    "basic_arithmetic",
    "base_conversion",
    "fraction_simplification",
    "decimal_arithmetic",
    "calendar_arithmetic",
    "arc_1d",
    "binary_matrix",
    "propositional_logic",
    "bf",
)

SMOL_EASY = Preset(
    name="smol-easy",
    tasks_per_round=8,
    description="easy two-term arithmetic for SmolLM2-135M-Instruct (base reward ~5-30%)",
    max_completion_tokens=64,  # an answer here is a few tokens; a node samples 48 by default
    entries=(
        # Without parentheses, an n-"digit" term is drawn from 0..10**n (inclusive), so one-digit
        # questions run 0..10 and two-digit ones 0..100. Results may be negative (3 - 7).
        _arith(2.0, ["+"], digits=1),  # measured 0.28 for the base model
        _arith(1.0, ["-"], digits=1),  # not measured alone; expected between the two others
        _arith(1.0, ["+", "-"], digits=2),  # measured 0.06
    ),
)

PAPER = Preset(
    name="paper",
    tasks_per_round=8,
    description="the nine reasoning-gym datasets of the SAPO paper, default configs, equal weights",
    entries=tuple(PresetEntry(dataset=name, weight=1.0) for name in PAPER_DATASETS),
)

SMOL_STRICT = SMOL_EASY.model_copy(
    update={
        "name": "smol-strict",
        "description": "smol-easy's arithmetic, scored strictly: 1 only for a clean exact answer",
        "scoring": "strict",
    }
)

PAPER_STRICT = PAPER.model_copy(
    update={
        "name": "paper-strict",
        "description": "the paper's nine datasets, scored strictly: 1 only for a clean exact answer",
        "scoring": "strict",
    }
)

def _specialist(own: int, count: int) -> tuple[float, ...]:
    """A specialty's weights: 0.7 on entry ``own``, the rest shared by the other entries."""
    return tuple(0.7 if j == own else 0.3 / (count - 1) for j in range(count))


SMOL_MIX_STRICT = Preset(
    name="smol-mix-strict",
    tasks_per_round=8,
    description="four kinds of one-digit arithmetic, each peer specialised in one, scored strictly",
    max_completion_tokens=64,
    entries=(
        # base SmolLM2-135M, strict, 16 tokens (scripts/measure_task_mix.py, docs/LOG.md):
        _arith(1.0, ["+"], digits=1),  # 0.19, half the groups with signal
        _arith(1.0, ["-"], digits=1),  # 0.16
        _arith(1.0, ["*"], digits=1),  # 0.22
        PresetEntry(
            dataset="basic_arithmetic",
            weight=1.0,
            config={
                "min_terms": 3,
                "max_terms": 3,
                "min_digits": 1,
                "max_digits": 1,
                "operators": ["+"],
                "allow_parentheses": False,
                "allow_negation": False,
            },
        ),  # 0.05, a sixth of the groups with signal
    ),
    specialties=tuple(_specialist(k, 4) for k in range(4)),
    scoring="strict",
)

PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (SMOL_STRICT, PAPER_STRICT, SMOL_MIX_STRICT, SMOL_EASY, PAPER)
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``; ``UnknownPreset`` (listing the known ones) otherwise."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise UnknownPreset(str(name), list(PRESETS)) from None
