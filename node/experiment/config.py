"""What an experiment runs: nodes, rounds, the I/J configurations, the learner, seeds, exchange."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, get_args

from node import defaults
from node.config import (
    LoraTargets,
    NodeConfig,
    PeerAdvantage,
    PeerImportance,
    is_no_value,
    with_overrides,
)
from node.defaults import DEFAULT_PRESET_NAME, SHIPPED_MODEL

EXCHANGES = ("chain", "inprocess")
ACCOUNTINGS = ("swarm", "paper")
_CONFIG = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True, order=True)
class Sharing:
    """One configuration: I local groups and J external groups per training step."""

    local: int
    external: int

    @property
    def label(self) -> str:
        return f"{self.local}/{self.external}"

    @property
    def slug(self) -> str:
        return f"{self.local}-{self.external}"

    @classmethod
    def parse(cls, text: str) -> Sharing:
        match = _CONFIG.match(str(text))
        if match is None:
            raise ValueError(f"configuration {text!r}: write I/J, e.g. 4/0 or 2/2")
        local, external = int(match[1]), int(match[2])
        if local + external == 0:
            raise ValueError(f"configuration {text!r} trains on nothing")
        return cls(local, external)


@dataclass(frozen=True)
class ExperimentConfig:
    """Every knob of a run (all of it is written to ``config.json`` in the output folder)."""

    nodes: int = 4
    rounds: int = 20
    configs: tuple[Sharing, ...] = (Sharing(4, 0), Sharing(2, 2), Sharing(0, 4))
    seeds: tuple[int, ...] = (0,)
    exchange: str = "chain"
    model: str = SHIPPED_MODEL
    preset: str = DEFAULT_PRESET_NAME
    tasks_per_round: int = 4
    accounting: str = "swarm"
    """``swarm``: every node answers ``tasks_per_round`` tasks and trains on I of its own groups;
    ``paper`` (the SAPO paper's): a node of an I/J configuration answers I tasks, trains on all of
    them with signal, and takes J groups from peers (``tasks_per_round`` is not used)."""
    group_size: int = 8
    max_new_tokens: int = 16
    temperature: float = 1.0
    """Always 1, the protocol's sampler (``swarm.sample/1``); kept so that old folders load."""
    lr: float = defaults.LEARNING_RATE
    lora_rank: int = 16
    beta: float = 0.0
    lora_targets: str = defaults.LORA_TARGETS
    peer_weight: float = 1.0
    peers_only_steps: bool = defaults.PEERS_ONLY_STEPS
    peer_logprob_gap: float | None = defaults.PEER_LOGPROB_GAP
    peer_importance: str = defaults.PEER_IMPORTANCE
    peer_importance_cap: float = 2.0
    peer_advantage: str = "all"
    strategy: str = "uniform"
    check_provenance: bool = True
    """Nodes recompute the peer groups they train on, as every node does (off only for tests
    whose learners write answers by hand, which the recompute rightly refuses)."""
    window: int = 5
    threads: int = 2
    precision: str = "auto"
    batch_nodes: bool = True
    share_prompts: bool = True
    eval_every: int = 0
    eval_tasks: int = 200
    same_tasks_as: str = ""
    """In-process only: a chain experiment's folder whose genesis seeds and first rounds the
    units reuse, so both exchanges see the same task streams (the exchange check)."""
    sample_texts: int = 2
    """Own completions per node and round written to ``samples.csv`` (0: none)."""

    def __post_init__(self) -> None:
        if self.exchange not in EXCHANGES:
            raise ValueError(f"exchange {self.exchange!r}: one of {', '.join(EXCHANGES)}")
        if self.nodes < 2:
            raise ValueError("an experiment needs at least 2 nodes (sharing needs peers)")
        if self.rounds < 1 or not self.configs or not self.seeds:
            raise ValueError("an experiment needs rounds, configurations and seeds")
        if len(set(self.configs)) != len(self.configs) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError("configurations and seeds must not repeat")
        if self.same_tasks_as and self.exchange != "inprocess":
            raise ValueError("same_tasks_as applies to the in-process exchange only")
        if self.precision not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"precision {self.precision!r}: one of auto, float32, bfloat16")
        if self.eval_every < 0 or self.eval_tasks < 1:
            raise ValueError("eval_every must be >= 0 (0 = never) and eval_tasks >= 1")
        if self.group_size < 2 or self.tasks_per_round < 1:
            raise ValueError("group size must be at least 2 and tasks per round at least 1")
        _one_of("accounting", self.accounting, ACCOUNTINGS)
        if self.accounting == "paper" and any(c.local == 0 for c in self.configs):
            raise ValueError(
                "accounting = paper: a configuration with I = 0 would answer no task; "
                "give every configuration I >= 1 (e.g. 6/2 instead of 0/8)"
            )
        if not self.lr > 0:
            raise ValueError(f"lr = {self.lr}: the learning rate must be > 0")
        if not self.beta >= 0:
            raise ValueError(f"beta = {self.beta}: the KL weight must be >= 0 (0 = no KL)")
        _one_of("lora_targets", self.lora_targets, get_args(LoraTargets))
        if not 0 < self.peer_weight <= 1:
            raise ValueError(f"peer_weight = {self.peer_weight}: must be in (0, 1]")
        if self.peer_logprob_gap is not None and not self.peer_logprob_gap > 0:
            raise ValueError(
                f"peer_logprob_gap = {self.peer_logprob_gap}: must be > 0 ('none' for no gap rule)"
            )
        _one_of("peer_importance", self.peer_importance, get_args(PeerImportance))
        if not self.peer_importance_cap > 1:
            raise ValueError(f"peer_importance_cap = {self.peer_importance_cap}: must be > 1")
        _one_of("peer_advantage", self.peer_advantage, get_args(PeerAdvantage))
        if self.sample_texts < 0:
            raise ValueError(f"sample_texts = {self.sample_texts}: must be >= 0 (0 = none)")

    @property
    def baseline(self) -> Sharing:
        """The no-sharing configuration (J = 0) if any, else the first one."""
        return next((c for c in self.configs if c.external == 0), self.configs[0])

    def tasks_of(self, sharing: Sharing) -> int:
        """n, the tasks every node of ``sharing``'s units answers per round (``accounting``)."""
        return sharing.local if self.accounting == "paper" else self.tasks_per_round

    def batch_shape(self, sharing: Sharing) -> tuple[int, int]:
        """(n, G) of every batch of ``sharing``'s units: the coordinator's rules on a chain, the
        in-process swarm's."""
        return self.tasks_of(sharing), self.group_size

    def node_config(self, unit: Unit, index: int, state_dir: Path) -> NodeConfig:
        """Node ``index`` of ``unit``: a node's defaults with the experiment's settings.

        Node i of a seed gets the same training seed in every configuration, so it starts from
        the same adapter and draws its samples the same way; only I and J differ.
        """
        return with_overrides(
            NodeConfig(),
            {
                "tasks": {"preset": self.preset, "tasks_per_round": self.tasks_of(unit.sharing)},
                "sampling": {
                    "local_groups": unit.sharing.local,
                    "external_groups": unit.sharing.external,
                    "group_size": self.group_size,
                    "strategy": self.strategy,
                    "check_provenance": self.check_provenance,
                },
                "model": {"source": self.model, "checkpoint_dir": state_dir},
                "generation": {
                    "max_new_tokens": self.max_new_tokens,
                    "temperature": self.temperature,
                },
                "training": {
                    "learning_rate": self.lr,
                    "lora_rank": self.lora_rank,
                    "lora_alpha": 2 * self.lora_rank,
                    "lora_targets": self.lora_targets,
                    "beta": self.beta,
                    "peer_weight": self.peer_weight,
                    "peers_only_steps": self.peers_only_steps,
                    "peer_logprob_gap": self.peer_logprob_gap,
                    "peer_importance": self.peer_importance,
                    "peer_importance_cap": self.peer_importance_cap,
                    "peer_advantage": self.peer_advantage,
                    "seed": unit.seed * 1000 + index,
                    "precision": self.precision,
                    "share_prompts": self.share_prompts,
                },
            },
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["configs"] = [c.label for c in self.configs]
        data["seeds"] = list(self.seeds)
        return data

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> ExperimentConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown experiment settings: {', '.join(sorted(unknown))}")
        values = _no_value_as_none(dict(data))
        if "configs" in values:
            values["configs"] = tuple(Sharing.parse(c) for c in values["configs"])
        if "seeds" in values:
            values["seeds"] = tuple(int(s) for s in values["seeds"])
        return cls(**values)

    @classmethod
    def from_toml(cls, path: Path) -> ExperimentConfig:
        """A TOML file of the same keys (``configs = ["4/0", "2/2"]``; table ``[experiment]``
        or top level)."""
        data = tomllib.loads(Path(path).read_text())
        return cls.from_mapping(data.get("experiment", data))

    def merged(self, **overrides: Any) -> ExperimentConfig:
        """This config with the given (non-None) values replaced; ``peer_logprob_gap="none"``
        turns the gap rule off."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **_no_value_as_none(given))


def save_config(config: ExperimentConfig, path: Path) -> None:
    path.write_text(json.dumps(config.to_json(), indent=2, sort_keys=True) + "\n")


#: The settings a run folder written before they existed ran with: every node's update as it was
#: then (LoRA on attention, no peer rule). Their defaults have changed since, so a missing key
#: must not take today's default, or an old folder would resume under other rules.
_BEFORE_THE_KEY: dict[str, Any] = {
    "lora_targets": "attention",
    "peers_only_steps": True,
    "peer_logprob_gap": None,
    "peer_importance": "none",
}


def load_config(path: Path) -> ExperimentConfig:
    """A run folder's ``config.json``; keys it predates take the values it ran with."""
    return ExperimentConfig.from_mapping(_BEFORE_THE_KEY | json.loads(path.read_text()))


def _no_value_as_none(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with ``peer_logprob_gap = "none"`` (a TOML file, the command line) as None."""
    if is_no_value(values.get("peer_logprob_gap")):
        return values | {"peer_logprob_gap": None}
    return values


def _one_of(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} {value!r}: one of {', '.join(choices)}")


@dataclass(frozen=True)
class Unit:
    """One configuration with one seed: N nodes trained for R rounds from fresh adapters."""

    sharing: Sharing
    seed: int

    @property
    def slug(self) -> str:
        return f"c{self.sharing.slug}-s{self.seed}"


def units(config: ExperimentConfig) -> list[Unit]:
    """Seed-major order: every configuration of seed 0 first, so a cut-short run compares."""
    return [Unit(c, s) for s in config.seeds for c in config.configs]


__all__ = [
    "EXCHANGES",
    "ExperimentConfig",
    "Sharing",
    "Unit",
    "load_config",
    "save_config",
    "units",
]
