"""The layers stay apart, checked in a fresh interpreter per package.

- node.policy knows nothing of the chain or storage: importing all of it loads none of them.
- The protocol layer never loads torch, transformers or node.policy: a node's chain client,
  tasks, batch format, stores and peer intake, the indexer, the learning types the round
  shares with the policy (node.learning_data), and the seeded sampler's seeds and the choice of
  who recomputes what (node.provenance.seeds, .choice) import without a model library.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ["node.chain", "node.storage", "node.rollouts", "node.sampling", "web3"]
PROTOCOL = [
    "node.chain",
    "node.tasks",
    "node.rollouts",
    "node.storage",
    "node.sampling",
    "coordinator_indexer",
    "node.learning_data",
    "node.round.own",
    "node.provenance.seeds",
    "node.provenance.choice",
]

# Imports the package and every module under it; a meta-path hook names the module whose import
# statement first asks for torch, transformers or node.policy. Exit 1 with that line if any did.
TORCH_FREE_CHECK = """
import importlib, pkgutil, sys

def forbidden(name):
    return name.split(".")[0] in ("torch", "transformers") or (name + ".").startswith("node.policy.")

class Tripwire:
    found = []

    def find_spec(self, fullname, path=None, target=None):
        if forbidden(fullname) and not self.found:
            frame = sys._getframe(1)
            while frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen")):
                frame = frame.f_back
            self.found.append(f"{frame.f_globals['__name__']} imports {fullname}")
        return None

sys.meta_path.insert(0, Tripwire())
package = importlib.import_module(sys.argv[1])
for info in pkgutil.walk_packages(getattr(package, "__path__", []), sys.argv[1] + "."):
    if not info.name.endswith(".__main__"):
        importlib.import_module(info.name)
loaded = sorted(m for m in sys.modules if forbidden(m))
if loaded:
    print(f"{Tripwire.found[0] if Tripwire.found else '?'}; loaded: {', '.join(loaded[:5])}")
    sys.exit(1)
"""


def check_torch_free(package: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", TORCH_FREE_CHECK, package],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


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


@pytest.mark.parametrize("package", PROTOCOL)
def test_protocol_layer_imports_no_torch_transformers_or_policy(package: str) -> None:
    result = check_torch_free(package)
    assert result.returncode == 0, f"{package}: {result.stdout.strip()}{result.stderr[-2000:]}"


def test_the_check_names_the_module_that_imports_the_policy() -> None:
    result = check_torch_free("node.round.learner")  # the round's seam to the policy
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stdout.startswith("node.round.learner imports transformers;"), result.stdout
    assert "node.policy" in result.stdout
