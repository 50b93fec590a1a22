"""The node's TOML configuration: defaults, the generated example, and clear errors."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from node.chain.errors import BadRpcUrl
from node.chain.rpc import connect
from node.cli import main
from node.config import (
    ConfigError,
    NodeConfig,
    example_toml,
    load_config,
    parse_config,
    with_overrides,
)


def test_example_is_valid_toml_equal_to_the_defaults(tmp_path: Path) -> None:
    text = example_toml()
    path = tmp_path / "node.toml"
    path.write_text(text)
    assert load_config(path) == NodeConfig()
    assert set(tomllib.loads(text)) == set(NodeConfig.model_fields)


def test_example_documents_every_field() -> None:
    text = example_toml()
    for section, field in NodeConfig.model_fields.items():
        for name, subfield in field.annotation.model_fields.items():
            assert subfield.description, f"{section}.{name} has no description"
            assert f"# {subfield.description}" in text


def test_partial_file_keeps_other_defaults() -> None:
    config = parse_config({"sampling": {"local_groups": 2, "external_groups": 6}})
    assert (config.sampling.local_groups, config.sampling.external_groups) == (2, 6)
    assert config.model == NodeConfig().model


def test_every_problem_is_listed_with_its_place() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {"sampling": {"group_size": 1, "strategy": "best"}, "chain": {"rpc_urll": "x"}}
        )
    message = str(caught.value)
    assert "3 problems:" in message
    assert "sampling.group_size" in message and "sampling.strategy" in message
    assert "chain.rpc_urll" in message  # a typo is an error, not silently ignored


def test_cross_field_rule_says_what_to_set() -> None:
    with pytest.raises(ConfigError, match="set at least one of them to 1"):
        parse_config({"sampling": {"local_groups": 0, "external_groups": 0}})


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="swarm config example"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[chain\nrpc_url = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize(
    ("url", "fix"),
    [
        ("127.0.0.1:8545", "write http://127.0.0.1:8545"),
        ("localhost", "write http://localhost"),
        ("ws://127.0.0.1:8546", "not an http:// or https:// URL"),
        ("http://", "not an http:// or https:// URL"),
    ],
)
def test_an_rpc_url_that_is_not_http_is_one_error_saying_what_to_write(
    tmp_path: Path, url: str, fix: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(fix)):
        with_overrides(NodeConfig(), {"chain": {"rpc_url": url}})
    with pytest.raises(BadRpcUrl, match=re.escape(fix)):  # a URL given on the command line
        connect(url)
    config = tmp_path / "node.toml"
    config.write_text(f'[chain]\nrpc_url = "{url}"\n')
    result = CliRunner().invoke(main, ["--config", str(config), "status"])
    assert result.exit_code == 1 and fix in result.output and "Traceback" not in result.output
    assert with_overrides(NodeConfig(), {"chain": {"rpc_url": "https://rpc.example.org/v1"}})


def test_the_stability_settings_reach_the_grpo_update_and_the_adapter() -> None:
    from node.round.factory import learner_settings

    training = {"lora_targets": "attention+mlp", "beta": 0.04, "learning_rate": 3e-5}
    training |= {"peer_weight": 0.25, "peers_only_steps": False, "peer_logprob_gap": 2.0}
    training |= {"peer_importance": "mask", "peer_importance_cap": 4.0}
    training |= {"peer_advantage": "positive"}
    settings = learner_settings(parse_config({"training": training}))
    assert settings.lora.target_modules == (
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
    )  # fmt: skip
    assert settings.optimizer.lr == 3e-5
    grpo = settings.grpo
    assert (grpo.beta, grpo.peer_weight, grpo.peers_only_steps) == (0.04, 0.25, False)
    assert (grpo.peer_logprob_gap, grpo.peer_importance, grpo.peer_importance_cap) == (
        2.0, "mask", 4.0,
    )  # fmt: skip
    assert grpo.peer_advantage == "positive"
    defaults = learner_settings(NodeConfig())
    assert defaults.lora.target_modules == settings.lora.target_modules  # attention+mlp
    assert defaults.optimizer.lr == 3e-4
    assert (defaults.grpo.peer_weight, defaults.grpo.peers_only_steps) == (1.0, False)
    assert (defaults.grpo.peer_logprob_gap, defaults.grpo.peer_importance) == (1.0, "truncate")
    off = learner_settings(parse_config({"training": {"peer_logprob_gap": "none"}}))
    assert off.grpo.peer_logprob_gap is None
    # every peer setting of the node is one of the update's, with the same default
    from node.config import TrainingSettings
    from node.policy.grpo import GRPOConfig

    for name, field in TrainingSettings.model_fields.items():
        if name.startswith("peer"):
            assert field.default == GRPOConfig.model_fields[name].default, name


@pytest.mark.parametrize(
    ("training", "where"),
    [
        ({"lora_targets": "mlp"}, "training.lora_targets"),
        ({"peer_weight": 0.0}, "training.peer_weight"),
        ({"peer_weight": 1.5}, "training.peer_weight"),
        ({"peer_logprob_gap": -1.0}, "training.peer_logprob_gap"),
        ({"peer_importance": "clip"}, "training.peer_importance"),
        ({"peer_importance_cap": 1.0}, "training.peer_importance_cap"),
        ({"peer_advantage": "negative"}, "training.peer_advantage"),
    ],
)
def test_a_bad_stability_setting_names_its_key(training: dict[str, object], where: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(where)):
        parse_config({"training": training})


def test_a_node_never_samples_past_its_preset_s_token_limit() -> None:
    from node.tasks.presets import get_preset

    limit = get_preset("smol-strict").max_completion_tokens
    assert parse_config({"generation": {"max_new_tokens": limit}})
    with pytest.raises(ConfigError, match=f"allows {limit} tokens per completion"):
        parse_config({"generation": {"max_new_tokens": limit + 1}})
    paper = {"tasks": {"preset": "paper-strict"}, "generation": {"max_new_tokens": limit + 1}}
    assert parse_config(paper).generation.max_new_tokens == limit + 1


def test_a_node_loads_its_model_in_float32_only() -> None:
    """Peers recompute what a node samples from fp32 logits (docs/PROTOCOL.md, Seeded sampler)."""
    assert NodeConfig().model.dtype is None
    assert with_overrides(NodeConfig(), {"model": {"dtype": "float32"}}).model.dtype == "float32"
    with pytest.raises(ConfigError, match="float32"):
        with_overrides(NodeConfig(), {"model": {"dtype": "bfloat16"}})
    with pytest.raises(ConfigError, match="must be 1"):
        with_overrides(NodeConfig(), {"generation": {"temperature": 0.7}})
