"""The learning half of a node: model loading, generation, GRPO with LoRA, checkpoints.

Knows nothing of the chain or storage: it takes prompts and groups, returns samples (text, token
ids, finish reason) and updates. The types it shares with the round are torch-free, in
``node.learning_data``.
"""
