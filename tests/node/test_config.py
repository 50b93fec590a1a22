"""The node's TOML configuration: defaults, the generated example, and clear errors."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from node.config import ConfigError, NodeConfig, example_toml, load_config, parse_config


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
    assert "3 problem(s)" in message
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
