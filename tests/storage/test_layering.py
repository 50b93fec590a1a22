"""The protocol packages stay light: node.rollouts and node.storage never import the learning
stack (torch, transformers, peft) or node.policy; node.storage does not need node.rollouts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("node.rollouts", {"torch", "transformers", "peft", "node.policy"}),
        ("node.storage", {"torch", "transformers", "peft", "node.policy", "node.rollouts"}),
    ],
)
def test_imports_stay_light(package: str, forbidden: set[str]) -> None:
    code = (
        "import sys, pkgutil, importlib\n"
        f"package = importlib.import_module({package!r})\n"
        "for module in pkgutil.iter_modules(package.__path__):\n"
        f"    importlib.import_module({package!r} + '.' + module.name)\n"
        f"forbidden = {sorted(forbidden)!r}\n"
        "bad = sorted(n for n in sys.modules if any(n == f or n.startswith(f + '.') "
        "for f in forbidden))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
