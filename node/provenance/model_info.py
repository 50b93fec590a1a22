"""A batch's LoRA shape (``model.lora``) and the adapter settings it stands for."""

from __future__ import annotations

from node.policy.adapters import LoraSettings
from node.rollouts.schema import LoraShape


def lora_shape(settings: LoraSettings) -> LoraShape:
    """What a batch records of an adapter's settings (dropout is training's, not sampling's)."""
    return LoraShape(
        rank=settings.rank, alpha=settings.alpha, targets=sorted(set(settings.target_modules))
    )


def lora_settings(shape: LoraShape) -> LoraSettings:
    """The adapter settings a batch's LoRA shape describes, to load its adapter into."""
    return LoraSettings(rank=shape.rank, alpha=shape.alpha, target_modules=tuple(shape.targets))
