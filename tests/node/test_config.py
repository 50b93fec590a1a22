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
