"""A node's configuration: one TOML file, validated by pydantic, every field documented once.

The ``Field(description=...)`` texts are the only help there is: ``example_toml()`` renders them
as the comments of a complete default file (``swarm config example``), and the CLI reads this
model. Sections: ``[chain]``, ``[identity]``, ``[storage]``, ``[tasks]``, ``[sampling]``,
``[model]``, ``[generation]``, ``[training]``, ``[round]``. Cross-field rules live in validators whose messages say what to set instead.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from node import defaults
from node.defaults import DEFAULT_PRESET_NAME, SHIPPED_MODEL
from node.urls import rpc_url_problem

if TYPE_CHECKING:
    from node.tasks.presets import Preset

TrainingPrecision = Literal["auto", "float32", "bfloat16"]
"""Matrix products of the GRPO update (node.policy.precision)."""

LoraTargets = Literal["attention", "attention+mlp"]
"""The layers a LoRA adapter trains (``node.policy.adapters.LORA_TARGETS`` names the modules)."""

PeerImportance = Literal["none", "truncate", "mask"]
PeerAdvantage = Literal["all", "positive"]
"""The peer-weighting rules of the GRPO update (``node.policy.peer_weights``)."""


class ConfigError(ValueError):
    """The configuration file is missing, not TOML, or invalid; the message lists each problem."""


#: How a TOML file or a command line says "no value" for a setting whose default is one (TOML
#: has no null): ``peer_logprob_gap = "none"``.
NO_VALUE = "none"


def is_no_value(value: object) -> bool:
    """Whether ``value`` is the word ``none`` (any case, spaces around)."""
    return isinstance(value, str) and value.strip().lower() == NO_VALUE


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChainSettings(_Section):
    rpc_url: str = Field(
        "http://127.0.0.1:8545", description="JSON-RPC URL of the chain the coordinator lives on."
    )
    deployment: Path = Field(
        Path("deployments/local.json"),
        description="Deployment file written by swarm-deploy (coordinator address, chain id, ABI).",
    )
    rpc_timeout: float = Field(10.0, gt=0, description="Seconds before one RPC call times out.")

    @field_validator("rpc_url")
    @classmethod
    def _http_url(cls, rpc_url: str) -> str:
        problem = rpc_url_problem(rpc_url)
        if problem is not None:
            raise ValueError(problem)
        return rpc_url


class IdentitySettings(_Section):
    keystore: Path = Field(
        Path("~/.swarm/keystore.json"),
        description="Encrypted keystore of this peer's key (created by `swarm init`).",
    )
    password_env: str = Field(
        "SWARM_KEYSTORE_PASSWORD",
        description="Environment variable holding the keystore password.",
    )
    password_file: Path | None = Field(
        None, description="File whose first line is the password (wins over password_env)."
    )


class StorageSettings(_Section):
    store: str = Field(
        "~/.swarm/store",
        description="Content store: a directory (local store) or a Kubo RPC URL "
        "such as http://127.0.0.1:5001.",
    )
    compress: bool = Field(False, description="zstd-compress published batches.")
    fetch_timeout: float = Field(10.0, gt=0, description="Seconds allowed for one peer's batch.")
    fetch_budget: float = Field(
        30.0, gt=0, description="Seconds allowed for fetching all peers' batches of a round."
    )
    allow_private_addresses: bool = Field(
        False,
        description="Dial and announce private, loopback and link-local store addresses (a swarm "
        "on one host or one LAN); false on a public testnet, where a peer's announced private "
        "address is another host's.",
    )


class TaskSettings(_Section):
    preset: str = Field(
        DEFAULT_PRESET_NAME,
        description="Task preset: smol-strict for the shipped model, paper-strict for strong "
        "ones (smol-easy and paper: the same tasks with partial credit).",
    )
    tasks_per_round: int | None = Field(
        None,
        ge=1,
        le=64,
        description="n for a swarm this configuration starts (local swarm, experiments): every "
        "batch answers tasks 0..n-1 of the preset's, each once; empty = all of them. A node on a "
        "chain answers what the coordinator's rules say (tasksPerRound), whatever this is.",
    )

    @model_validator(mode="after")
    def _within_the_preset(self) -> TaskSettings:
        if self.tasks_per_round is None:
            return self
        preset = _known_preset(self.preset)
        available = None if preset is None else preset.tasks_per_round
        if available is not None and self.tasks_per_round > available:
            raise ValueError(
                f"tasks_per_round = {self.tasks_per_round}, but preset {self.preset!r} derives "
                f"{available} tasks per round: set at most {available}, or leave it empty"
            )
        return self

    def count(self) -> int:
        """n: ``tasks_per_round``, or the preset's count (UnknownPreset for an unknown preset)."""
        from node.tasks.presets import get_preset  # reasoning-gym loads only when asked

        return self.tasks_per_round or get_preset(self.preset).tasks_per_round


def _known_preset(name: str) -> Preset | None:
    """The preset called ``name``; None for a name this node does not know (reported later)."""
    from node.tasks.presets import PRESETS  # reasoning-gym loads only when asked

    return PRESETS.get(name)


class SamplingSettings(_Section):
    local_groups: int = Field(
        4, ge=0, le=64, description="I: own rollout groups trained on per round."
    )
    external_groups: int = Field(
        4, ge=0, le=64, description="J: peers' verified groups trained on per round."
    )
    group_size: int = Field(
        8,
        ge=2,
        le=32,
        description="G for a swarm this configuration starts (local swarm, experiments): "
        "completions generated per task. A node on a chain uses the coordinator's rules "
        "(groupSize), whatever this is.",
    )
    fetch_peers: int = Field(
        8,
        ge=0,
        le=1024,
        description="Peers' new batches fetched and verified per round to train on, drawn at "
        "random (batches this node judges as a committee member are fetched besides).",
    )
    strategy: Literal["uniform", "verified-history"] = Field(
        "uniform", description="How the J external groups are chosen among verified ones."
    )
    check_provenance: bool = Field(
        True,
        description="Recompute every peer group under its publisher's adapter before training "
        "on it, and train only on the completions its sampler picked (about 1 s a group); as a "
        "committee seat, recompute the groups the beacon picks, post evidence against a batch "
        "that fails and commit in the commit phase's last round, after re-checking the others' "
        "evidence.",
    )

    @model_validator(mode="after")
    def _something_to_train_on(self) -> SamplingSettings:
        if self.local_groups + self.external_groups == 0:
            raise ValueError("local_groups + external_groups is 0: set at least one of them to 1")
        return self


class ModelSettings(_Section):
    source: str = Field(
        SHIPPED_MODEL,
        description="Base model: smollm2-135m (shipped), tiny (tests), or a local HF model folder.",
    )
    device: str | None = Field(None, description="cpu, cuda or mps; empty picks the best there is.")
    dtype: Literal["float32"] | None = Field(
        None,
        description="float32 (also when empty), on every device: peers recompute what a node "
        "samples, which needs fp32 logits.",
    )
    checkpoint_dir: Path = Field(
        Path("~/.swarm/checkpoints"), description="Where adapter, optimizer and round state go."
    )


class GenerationSettings(_Section):
    max_new_tokens: int = Field(
        48,
        ge=1,
        le=2048,
        description="Longest completion, in tokens, its stop included (answers here are short); "
        "at most the preset's limit (64 for smol-*, 512 for paper-*), which peers enforce.",
    )
    temperature: float = Field(
        1.0,
        description="Sampling temperature: 1, the only one the protocol's seeded sampler "
        "(swarm.sample/1) uses, so that peers can recompute what was sampled.",
    )
    top_p: float = Field(
        1.0, description="Nucleus sampling: 1 (the whole vocabulary), as the protocol fixes."
    )

    @field_validator("temperature", "top_p")
    @classmethod
    def _the_protocol_s_sampler(cls, value: float, info: ValidationInfo) -> float:
        if value != 1.0:
            raise ValueError(
                f"{info.field_name} must be 1: the protocol's seeded sampler (swarm.sample/1) "
                "samples the whole distribution so that peers can check what was sampled; "
                f"remove generation.{info.field_name} from the config"
            )
        return value


class TrainingSettings(_Section):
    learning_rate: float = Field(
        defaults.LEARNING_RATE, gt=0, description="AdamW learning rate of the LoRA adapter."
    )
    lora_rank: int = Field(16, ge=1, le=256, description="LoRA rank (r).")
    lora_alpha: int = Field(32, ge=1, description="LoRA alpha (scale = alpha / rank).")
    lora_targets: LoraTargets = Field(
        defaults.LORA_TARGETS,
        description="Layers the LoRA adapter trains: 'attention' (q, k, v, o projections) or "
        "'attention+mlp' (also the MLP's gate, up and down projections).",
    )
    beta: float = Field(0.0, ge=0, description="KL penalty weight against the base; 0 = none.")
    peer_weight: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Peers' groups' advantages are multiplied by it (own groups': 1).",
    )
    peers_only_steps: bool = Field(
        defaults.PEERS_ONLY_STEPS,
        description="Step when every group with a learning signal is a peer's "
        "(false: no update then).",
    )
    peer_logprob_gap: float | None = Field(
        defaults.PEER_LOGPROB_GAP,
        gt=0,
        description="Drop a peer's group whose mean per-token log-prob under the policy is more "
        "than this many nats below the own completions'; \"none\" = keep all.",
    )
    peer_importance: PeerImportance = Field(
        defaults.PEER_IMPORTANCE,
        description="Peers' token weights w = exp(policy log-prob - sender's; 1 where the "
        "sender's is unknown): 'none' (1), 'truncate' (at most peer_importance_cap) or 'mask' "
        "(0 outside [1/cap, cap]).",
    )
    peer_importance_cap: float = Field(
        2.0, gt=1, description="The cap of peer_importance ('truncate' and 'mask')."
    )
    peer_advantage: PeerAdvantage = Field(
        "all",
        description="Peers' completions trained on: 'all', or 'positive' (advantage > 0 only).",
    )

    @field_validator("peer_logprob_gap", mode="before")
    @classmethod
    def _no_gap(cls, value: object) -> object:
        """TOML has no null: ``peer_logprob_gap = "none"`` turns the rule off."""
        return None if is_no_value(value) else value

    micro_batch_size: int = Field(
        16,
        ge=1,
        description="Completions per forward/backward pass (lower it to save memory). Nodes "
        "trained together in one process (experiment, local swarm) pass this many per node.",
    )
    precision: TrainingPrecision = Field(
        "auto",
        description="Matrix products of the GRPO update: 'auto' = bfloat16 autocast where the "
        "CPU has native bf16 (AMX or AVX512-BF16) and it measures faster than float32 at start, "
        "else float32; 'float32' turns it off. Sampling is always float32.",
    )
    share_prompts: bool = Field(
        True,
        description="Run each group's prompt once for its completions in the GRPO update "
        "(false: every completion as a full sequence; same result, several times the work).",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seeds the adapter's initialisation and the choice of peers and groups "
        "(sampling follows the protocol's public seeds).",
    )
    torch_threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads for torch; empty = torch's default (all cores).",
    )


class RoundSettings(_Section):
    collect_fraction: float = Field(
        0.6,
        gt=0,
        le=1,
        description="Wait for peers' batches until this share of the round has passed "
        "(or until every active peer has published).",
    )
    poll_interval: float = Field(
        2.0, gt=0, description="Seconds between chain polls while waiting."
    )
    settle_disputes: bool = Field(
        True,
        description="Settle the batches this node flagged once their reveal phase is over, "
        "resolve its flags and report agreements with upheld flags.",
    )
    max_rounds: int | None = Field(
        None, ge=1, description="Stop after this many rounds; empty = run until Ctrl-C."
    )


class NodeConfig(_Section):
    """Everything ``swarm run`` needs."""

    chain: ChainSettings = Field(default_factory=ChainSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    tasks: TaskSettings = Field(default_factory=TaskSettings)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    round: RoundSettings = Field(default_factory=RoundSettings)

    @model_validator(mode="after")
    def _within_the_token_limit(self) -> NodeConfig:
        """Peers flag a completion longer than the preset allows (``too_many_tokens``)."""
        preset = _known_preset(self.tasks.preset)
        wanted = self.generation.max_new_tokens
        if preset is not None and wanted > preset.max_completion_tokens:
            raise ValueError(
                f"generation.max_new_tokens = {wanted}, but preset {preset.name!r} allows "
                f"{preset.max_completion_tokens} tokens per completion (peers flag longer ones): "
                f"set at most {preset.max_completion_tokens}"
            )
        return self

    def batch_shape(self) -> tuple[int, int]:
        """(n, G) of a swarm this configuration starts: the tasks every batch answers and the
        completions per task (the local swarm deploys its coordinator with them, an experiment its
        in-process swarm). A node always produces and verifies the shape of the round's rules."""
        return self.tasks.count(), self.sampling.group_size


def load_config(path: Path) -> NodeConfig:
    """Reads and validates ``path``; ConfigError with every problem and where it is."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"no configuration at {path}: write one with `swarm config example > {path}`"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    return parse_config(data, source=str(path))


def parse_config(data: dict[str, Any], *, source: str = "configuration") -> NodeConfig:
    """Validates already-parsed TOML data."""
    try:
        return NodeConfig.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(part) for part in error['loc']) or '(top)'}: "
            f"{error['msg'].removeprefix('Value error, ')}"
            for error in exc.errors()
        ]
        if len(problems) == 1:
            raise ConfigError(f"{source}: {problems[0]}") from None
        listed = "\n".join(f"  {problem}" for problem in problems)
        raise ConfigError(f"{source} has {len(problems)} problems:\n{listed}") from None


def with_overrides(config: NodeConfig, overrides: Mapping[str, Mapping[str, Any]]) -> NodeConfig:
    """``config`` with some settings replaced, section by section, validated like a file.

    ``with_overrides(NodeConfig(), {"sampling": {"group_size": 4}})`` is the default
    configuration with groups of 4: how the local swarm and the experiment state what they
    set differently from a node's defaults.
    """
    data = config.model_dump()
    for section, values in overrides.items():
        if section not in data:
            raise ConfigError(f"overrides name an unknown section [{section}]")
        data[section] = {**data[section], **values}
    return parse_config(data, source="the overridden configuration")


def config_toml(config: NodeConfig) -> str:
    """The TOML file of ``config``'s settings that differ from the defaults."""
    lines: list[str] = []
    for section, values in config.model_dump(exclude_defaults=True).items():
        if values:
            lines += [f"[{section}]"]
            lines += [f"{name} = {_toml_value(value)}" for name, value in values.items()]
            lines.append("")
    return "\n".join(lines)


def example_toml(model: type[BaseModel] = NodeConfig) -> str:
    """A complete TOML file of the defaults, each key preceded by its description."""
    lines = [
        "# Swarm node configuration. Every key is optional; shown here with its default.",
    ]
    for section, field in model.model_fields.items():
        section_model = field.annotation
        assert isinstance(section_model, type) and issubclass(section_model, BaseModel)
        lines += ["", f"[{section}]"]
        for name, subfield in section_model.model_fields.items():
            lines.append(f"# {subfield.description}")
            default = subfield.get_default(call_default_factory=True)
            line = f"{name} = {_toml_value(default)}" if default is not None else f"# {name} ="
            lines.append(line)
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if value is None:  # TOML has no null (only peer_logprob_gap is None other than by default)
        return f'"{NO_VALUE}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
