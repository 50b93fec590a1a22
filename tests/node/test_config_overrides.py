"""NodeConfig as the one source of settings: overrides, the TOML a local node is given, the
learner's settings derived from it (GRPO's cutoff is the sampler's max_new_tokens)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from node.config import ConfigError, NodeConfig, config_toml, parse_config, with_overrides
from node.defaults import DEFAULT_PRESET_NAME, SHIPPED_MODEL
from node.experiment.config import ExperimentConfig, Sharing, Unit
from node.local.swarm import DEMO_NODE, LocalSwarmSettings, peer_config


def test_overrides_replace_only_what_they_name_and_are_validated() -> None:
    config = with_overrides(NodeConfig(), {"sampling": {"group_size": 4}})
    assert config.sampling.group_size == 4
    assert config.sampling.local_groups == NodeConfig().sampling.local_groups
    assert config.generation == NodeConfig().generation
    with pytest.raises(ConfigError, match="sampling.group_size"):
        with_overrides(NodeConfig(), {"sampling": {"group_size": 1}})
    with pytest.raises(ConfigError, match="unknown section"):
        with_overrides(NodeConfig(), {"sampler": {"group_size": 4}})
    with pytest.raises(ConfigError, match="sampling.groups"):
        with_overrides(NodeConfig(), {"sampling": {"groups": 4}})


def test_config_toml_holds_exactly_the_changed_settings_and_reads_back(tmp_path: Path) -> None:
    config = with_overrides(
        DEMO_NODE,
        {"model": {"checkpoint_dir": tmp_path / "a dir"}, "training": {"learning_rate": 5e-5, "peer_logprob_gap": None}},
    )
    text = config_toml(config)
    data = tomllib.loads(text)
    assert parse_config(data) == config
    assert "chain" not in data and "round" not in data  # defaults are left out
    assert data["training"] == {"learning_rate": 5e-5, "peer_logprob_gap": "none"}
    assert config_toml(NodeConfig()) == ""


def test_one_default_each_for_the_shipped_model_and_the_preset() -> None:
    assert NodeConfig().model.source == SHIPPED_MODEL == ExperimentConfig().model
    assert NodeConfig().tasks.preset == DEFAULT_PRESET_NAME == ExperimentConfig().preset


def test_a_local_peer_is_the_demo_node_with_its_own_identity_state_and_seed(
    tmp_path: Path,
) -> None:
    settings = LocalSwarmSettings()
    folder = tmp_path / "nodes" / "node-2"
    config = peer_config(
        settings.node, 2, folder, tmp_path, "http://127.0.0.1:1234", str(tmp_path / "store")
    )
    assert config.sampling == DEMO_NODE.sampling and config.generation == DEMO_NODE.generation
    assert config.training.seed == 2
    assert config.model.checkpoint_dir == folder / "state"
    assert config.identity.keystore == folder / "keystore.json"
    assert config.chain.rpc_url == "http://127.0.0.1:1234"
    assert parse_config(tomllib.loads(config_toml(config))) == config


def test_an_experiment_node_differs_between_configurations_only_in_i_and_j(
    tmp_path: Path,
) -> None:
    experiment = ExperimentConfig(max_new_tokens=12, lr=5e-4, lora_rank=8)
    a = experiment.node_config(Unit(Sharing(4, 0), 3), 1, tmp_path)
    b = experiment.node_config(Unit(Sharing(2, 2), 3), 1, tmp_path)
    assert (a.sampling.local_groups, a.sampling.external_groups) == (4, 0)
    assert (b.sampling.local_groups, b.sampling.external_groups) == (2, 2)
    assert a.model_copy(update={"sampling": b.sampling}) == b
    assert a.training.seed == 3001 and a.training.lora_alpha == 16
    assert a.generation.max_new_tokens == 12 and a.model.checkpoint_dir == tmp_path
    other_node = experiment.node_config(Unit(Sharing(4, 0), 3), 2, tmp_path)
    assert other_node.training.seed != a.training.seed
