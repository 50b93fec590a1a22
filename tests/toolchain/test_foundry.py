"""The chain toolchain's commands fail when their step fails.

npm's Foundry wrappers (node_modules/.bin/forge, ...) always exit 0, so everything runs the native
binaries, found by node.local.foundry (Python) and scripts/foundry-bin (shell). These tests run the
project's own forge step (scripts/forge-test) and test command (scripts/test) on a copy of the
project with a Solidity test that fails, and check that the failure reaches the exit status.
The copy holds contracts/src, foundry.toml and the scripts; node_modules and .venv are links to
this checkout's. It compiles once per module (solc-js, ~4 s on 2 cores).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from node.chain.abi import REPO_ROOT
from node.local.foundry import TOOLS, FoundryMissing, foundry_binary, platform_package

FAILING_TEST = """\
// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

contract FailsTest {
    function testThisOneFails() public pure {
        revert("deliberate failure");
    }
}
"""
PASSING_TEST = """\
// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

contract PassesTest {
    function testThisOnePasses() public pure {}
}
"""
# scripts/test's first step; the copy uses this checkout's installation (linked), so nothing to do.
NO_BOOTSTRAP = "#!/usr/bin/env bash\nexit 0\n"
SCRIPTS = ("forge-test", "foundry-bin", "solc", "test")


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def copy_project(dest: Path) -> Path:
    """The contracts, forge settings and scripts, with node_modules and .venv linked."""
    shutil.copytree(REPO_ROOT / "contracts" / "src", dest / "contracts" / "src")
    shutil.copy2(REPO_ROOT / "foundry.toml", dest / "foundry.toml")
    (dest / "scripts").mkdir()
    for name in SCRIPTS:
        shutil.copy2(REPO_ROOT / "scripts" / name, dest / "scripts" / name)
    bootstrap = dest / "scripts" / "bootstrap"
    bootstrap.write_text(NO_BOOTSTRAP)
    bootstrap.chmod(0o755)
    for name in ("node_modules", ".venv"):
        (dest / name).symlink_to(REPO_ROOT / name, target_is_directory=True)
    return dest


@pytest.fixture(scope="module")
def failing_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project copy with one failing and one passing Solidity test, compiled."""
    project = copy_project(tmp_path_factory.mktemp("forge") / "project")
    tests = project / "contracts" / "test"
    tests.mkdir()
    (tests / "Fails.t.sol").write_text(FAILING_TEST)
    (tests / "Passes.t.sol").write_text(PASSING_TEST)
    build = run([str(foundry_binary("forge")), "build"], project)
    assert build.returncode == 0, build.stdout + build.stderr
    return project


@pytest.fixture()
def passing_project(failing_project: Path, tmp_path: Path) -> Path:
    """A copy of the compiled project without the failing test."""
    project = tmp_path / "project"
    shutil.copytree(failing_project, project, symlinks=True)
    (project / "contracts" / "test" / "Fails.t.sol").unlink()
    return project


def test_forge_step_fails_and_names_the_failing_test(failing_project: Path) -> None:
    result = run(["scripts/forge-test"], failing_project)
    assert result.returncode != 0
    assert "[FAIL: deliberate failure] testThisOneFails()" in result.stdout
    assert "[PASS] testThisOnePasses()" in result.stdout


def test_forge_step_passes_when_every_test_passes(passing_project: Path) -> None:
    result = run(["scripts/forge-test"], passing_project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 tests passed, 0 failed" in result.stdout


def test_scripts_test_stops_when_forge_fails(failing_project: Path) -> None:
    result = run(["scripts/test"], failing_project)
    assert result.returncode != 0
    assert "testThisOneFails" in result.stdout
    assert "==> pytest" not in result.stdout


def test_scripts_test_exits_with_pytest_status(passing_project: Path) -> None:
    tests = passing_project / "tests"
    tests.mkdir()
    (tests / "test_one.py").write_text("def test_python_fails():\n    assert 1 == 2\n")
    pytest_args = ["-q", "-p", "no:cacheprovider", "tests"]
    failed = run(["scripts/test", *pytest_args], passing_project)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "[PASS] testThisOnePasses()" in failed.stdout
    assert "FAILED tests/test_one.py::test_python_fails" in failed.stdout
    # pytest's "no tests collected" status (5) comes through unchanged
    nothing = run(["scripts/test", *pytest_args, "-k", "no_such_test"], passing_project)
    assert nothing.returncode == 5, nothing.stdout + nothing.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_python_and_shell_find_the_same_native_binary(tool: str) -> None:
    path = foundry_binary(tool)
    assert path.parent.parent.name == platform_package(tool)
    shell = run(["scripts/foundry-bin", tool], REPO_ROOT)
    assert shell.returncode == 0, shell.stderr
    assert Path(shell.stdout.strip()) == path
    version = run([str(path), "--version"], REPO_ROOT)
    assert version.returncode == 0 and "1.7.1" in version.stdout


def test_a_missing_binary_names_the_bootstrap(tmp_path: Path) -> None:
    with pytest.raises(FoundryMissing, match="forge is not installed .*run scripts/bootstrap"):
        foundry_binary("forge", root=tmp_path)
    (tmp_path / "scripts").mkdir()
    shutil.copy2(REPO_ROOT / "scripts" / "foundry-bin", tmp_path / "scripts" / "foundry-bin")
    shell = run(["scripts/foundry-bin", "forge"], tmp_path)
    assert shell.returncode == 1
    assert "forge is not installed" in shell.stderr and "run scripts/bootstrap" in shell.stderr


@pytest.mark.parametrize(
    ("system", "machine", "package"),
    [
        ("Linux", "x86_64", "cast-linux-amd64"),
        ("Linux", "aarch64", "cast-linux-arm64"),
        ("Darwin", "arm64", "cast-darwin-arm64"),
        ("Darwin", "x86_64", "cast-darwin-amd64"),
    ],
)
def test_platform_package_names(system: str, machine: str, package: str) -> None:
    assert platform_package("cast", system, machine) == package


def test_unsupported_platform_and_tool_are_refused() -> None:
    with pytest.raises(FoundryMissing, match="no Foundry build for Windows/AMD64"):
        platform_package("forge", "Windows", "AMD64")
    with pytest.raises(ValueError, match="unknown Foundry tool 'chisel'"):
        platform_package("chisel")
