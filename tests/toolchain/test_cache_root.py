"""One cache root: the Python rule (node.defaults.cache_root) and the shell scripts' rule
(scripts/bootstrap, scripts/build-kubo) name the same folder in every environment, and everything
the project caches (the Python environments, Kubo, the dequantised model) lies under it, so that
``rm -rf`` of it removes all of it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from node.chain.abi import REPO_ROOT
from node.defaults import (
    CACHE_DIR_NAME,
    CACHE_ROOT_SHELL,
    SHIPPED_MODEL,
    cache_root,
    model_cache_dir,
)
from node.local.kubo import KUBO_VERSION, tools_binary

#: The scripts that define the cache root (each once, as ``cache_root=<CACHE_ROOT_SHELL>``).
SCRIPTS_WITH_CACHE = ("bootstrap", "build-kubo")
CACHE_VARIABLES = ("SWARM_CACHE_DIR", "XDG_CACHE_HOME", "SWARM_MODEL_CACHE")
_DEFINITION = re.compile(r"^\s*cache_root=(.*)$", re.MULTILINE)

# (SWARM_CACHE_DIR, XDG_CACHE_HOME): None is unset, "" is set and empty (counts as unset)
ENVIRONMENTS = [
    (None, None),
    ("", ""),
    (None, "xdg"),
    ("", "xdg"),
    ("named", None),
    ("named", "xdg"),
    ("named", ""),
]


def shell_definition(script: str) -> str:
    """The right-hand side of the script's one ``cache_root=`` line."""
    text = (REPO_ROOT / "scripts" / script).read_text()
    found = _DEFINITION.findall(text)
    assert len(found) == 1, f"scripts/{script} defines cache_root {len(found)} times: {found}"
    return found[0].strip()


def environment(tmp_path: Path, swarm: str | None, xdg: str | None) -> dict[str, str]:
    """A clean environment: HOME in tmp_path, the cache variables as given (paths in tmp_path)."""
    env = {k: v for k, v in os.environ.items() if k not in CACHE_VARIABLES}
    env["HOME"] = str(tmp_path / "home")
    if swarm is not None:
        env["SWARM_CACHE_DIR"] = str(tmp_path / swarm) if swarm else ""
    if xdg is not None:
        env["XDG_CACHE_HOME"] = str(tmp_path / xdg) if xdg else ""
    return env


def shell_cache_root(expression: str, env: dict[str, str]) -> Path:
    result = subprocess.run(
        ["bash", "-c", f'set -u; cache_root={expression}; printf %s "$cache_root"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return Path(result.stdout)


def use(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in (*CACHE_VARIABLES, "HOME"):
        monkeypatch.delenv(name, raising=False)
    for name in (*CACHE_VARIABLES, "HOME"):
        if name in env:
            monkeypatch.setenv(name, env[name])


@pytest.mark.parametrize("script", SCRIPTS_WITH_CACHE)
def test_each_script_defines_the_cache_root_with_the_one_expression(script: str) -> None:
    assert shell_definition(script) == CACHE_ROOT_SHELL


@pytest.mark.parametrize(("swarm", "xdg"), ENVIRONMENTS)
def test_python_and_the_scripts_name_the_same_cache_root(
    swarm: str | None, xdg: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = environment(tmp_path, swarm, xdg)
    use(monkeypatch, env)
    python = cache_root()
    if swarm:
        expected = tmp_path / swarm
    elif xdg:
        expected = tmp_path / xdg / CACHE_DIR_NAME
    else:
        expected = tmp_path / "home" / ".cache" / CACHE_DIR_NAME
    assert python == expected
    for script in SCRIPTS_WITH_CACHE:
        assert shell_cache_root(shell_definition(script), env) == python, script


@pytest.mark.parametrize(("swarm", "xdg"), ENVIRONMENTS)
def test_everything_the_project_caches_lies_under_the_root(
    swarm: str | None, xdg: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, environment(tmp_path, swarm, xdg))
    root = cache_root()
    assert model_cache_dir() == root  # the model in <root>/smollm2-135m/
    assert (model_cache_dir() / SHIPPED_MODEL).is_relative_to(root)
    assert tools_binary() == root / "tools" / f"kubo-{KUBO_VERSION}" / "ipfs"
    # the old default was ~/.cache/swarm, outside the root
    assert not model_cache_dir().is_relative_to(tmp_path / "home" / ".cache" / "swarm")


def test_swarm_model_cache_still_overrides_the_model_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, environment(tmp_path, "named", None))
    monkeypatch.setenv("SWARM_MODEL_CACHE", str(tmp_path / "models"))
    assert model_cache_dir() == tmp_path / "models"
    assert cache_root() == tmp_path / "named"  # the rest stays in the root
    monkeypatch.setenv("SWARM_MODEL_CACHE", "")
    assert model_cache_dir() == tmp_path / "named"


def test_the_model_loader_uses_the_model_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from node.policy.model import default_cache_dir

    use(monkeypatch, environment(tmp_path, None, "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / CACHE_DIR_NAME


def test_no_other_code_spells_out_a_cache_folder() -> None:
    """Only node/defaults.py decides where the project caches (no second default elsewhere)."""
    spelled = re.compile(r"XDG_CACHE_HOME|SWARM_CACHE_DIR|[\"']\.cache[\"']|swarm-testnet")
    offenders = []
    for path in sorted((REPO_ROOT / "node").rglob("*.py")):
        if path == REPO_ROOT / "node" / "defaults.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if spelled.search(line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_scripts_name_the_cache_variables_only_through_the_root() -> None:
    """In scripts/, XDG_CACHE_HOME appears (outside comments) only in the cache_root= lines."""
    offenders = []
    for path in sorted((REPO_ROOT / "scripts").iterdir()):
        if not path.is_file() or path.suffix == ".py":
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith("cache_root=") else ""
            if "XDG_CACHE_HOME" in code or "swarm-testnet" in code:
                offenders.append(f"scripts/{path.name}:{number}: {line.strip()}")
    assert offenders == []
