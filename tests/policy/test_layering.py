"""node.policy knows nothing of the chain or storage: importing all of it loads none of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ["node.chain", "node.storage", "node.rollouts", "node.sampling", "web3"]


def test_policy_imports_no_protocol_module() -> None:
    code = (
        "import sys, pkgutil, importlib\n"
        "package = importlib.import_module('node.policy')\n"
        "for module in pkgutil.iter_modules(package.__path__):\n"
        "    importlib.import_module('node.policy.' + module.name)\n"
        f"forbidden = {FORBIDDEN!r}\n"
        "bad = sorted(n for n in sys.modules if any(n == f or n.startswith(f + '.') "
        "for f in forbidden))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
