"""The learning half of a node: model loading, generation, GRPO with LoRA, checkpoints.

Knows nothing of the chain or storage: it takes prompts and groups, returns texts and updates.
"""
