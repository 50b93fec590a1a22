"""Many nodes, one base: a LoRA adapter and an AdamW optimizer per node over one frozen model.

``AdapterPool(base)`` wraps ``base.model`` with peft on the first ``add`` (``get_peft_model``; the
LoRA layers are injected into that model *in place*, so its weights are shared, never copied),
then ``add_adapter`` for every further node. Exactly one adapter is active at a time:

    pool = AdapterPool(load_base("smollm2-135m"))
    pool.add("alice", LoraSettings(rank=16), seed=1)
    pool.add("bob", seed=2)
    with pool.activate("alice") as model:      # alice's adapter generates and trains
        ...; pool.optimizer("alice").step()
    with pool.reference() as model:            # the base alone (KL reference)
        ...

Only the active adapter's parameters require gradients; the base's never do. Each node's
optimizer holds that node's adapter parameters only, in a fixed order (sorted by name) so its
state can be checkpointed and restored. A new adapter starts as the base (LoRA's B is zero).

Several adapters can also share one forward pass, each batch row through its own adapter (the
S-LoRA / Punica idea), so that several in-process nodes generate and train together:

    with pool.rows(["alice", "alice", "bob", None], trainable=True) as routing:
        out = pool.model(input_ids)            # rows 0-1 alice, row 2 bob, row 3 the base
        routing.select([0, 2])                 # the batch lost rows 1 and 3 (e.g. they stopped)

For the block each LoRA layer's forward is ``RowAdapters.forward``: the frozen base's product once
for all rows, then each run of consecutive rows with one adapter adds that adapter's low-rank
product (recording gradients, the adapters' products are stacked instead: ``RowAdapters``).
With ``trainable=True`` every named adapter takes gradients, so one backward pass fills each
node's gradients; each node's optimizer then steps its own.
Not thread-safe: activate adapters and route rows from one thread.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import LoraLayer
from transformers import PreTrainedModel

from node.policy.model import BaseModel

_ADAPTER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BORROWED = "borrowed-"

ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
#: The LoRA target choices of a node's ``[training] lora_targets`` (Llama/SmolLM module names).
LORA_TARGETS: dict[str, tuple[str, ...]] = {
    "attention": ATTENTION_MODULES,
    "attention+mlp": ATTENTION_MODULES + MLP_MODULES,
}


@dataclass(frozen=True)
class LoraSettings:
    """One node's LoRA adapter. Checkpoints store it and refuse to load into a different one."""

    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ATTENTION_MODULES

    def __post_init__(self) -> None:
        if self.rank < 1 or self.alpha <= 0:
            raise ValueError(f"LoRA rank and alpha must be positive, got {self.rank}, {self.alpha}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise ValueError("LoRA needs at least one target module (e.g. q_proj)")
        object.__setattr__(self, "target_modules", tuple(self.target_modules))

    def to_peft(self) -> LoraConfig:
        return LoraConfig(
            r=self.rank,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=list(self.target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "target_modules": list(self.target_modules)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> LoraSettings:
        return cls(**{**data, "target_modules": tuple(data["target_modules"])})  # type: ignore[arg-type]


@dataclass(frozen=True)
class OptimizerSettings:
    """AdamW over one adapter. LoRA takes learning rates ~10x those of full fine-tuning."""

    lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    eps: float = 1e-8


class RowAdapters:
    """Which adapter each row of the next forward passes goes through (``AdapterPool.rows``).

    Rows are handled as runs of consecutive rows with the same adapter (Punica's "segments"):
    each LoRA layer adds each run's low-rank product to the base's output in place, so rows of
    one adapter should be kept together. In a pass that records gradients the adapters are
    stacked instead (``_stacked``): two products for all rows, whatever the runs.
    """

    def __init__(self, names: Sequence[str | None], *, stacked: bool = True) -> None:
        self.stacked = stacked
        self.set(names)

    def set(self, names: Sequence[str | None]) -> None:
        """Routes the next passes' rows to ``names`` (None: the base alone)."""
        self.names = list(names)
        self.segments: list[tuple[str, int, int]] = []  # (adapter, first row, end row)
        self._masks: dict[tuple, torch.Tensor] = {}  # _stacked's, by the layer's adapters
        for row, name in enumerate(self.names):
            if name is None:
                continue
            if self.segments and self.segments[-1][0] == name and self.segments[-1][2] == row:
                self.segments[-1] = (name, self.segments[-1][1], row + 1)
            else:
                self.segments.append((name, row, row + 1))

    def select(self, rows: Sequence[int]) -> None:
        """Keeps the routing of ``rows`` only, in that order (the batch was narrowed to them)."""
        self.set([self.names[i] for i in rows])

    def forward(self, layer: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        """``layer``'s output (a peft LoRA linear): the base's, plus each run's adapter."""
        if len(self.names) != x.shape[0]:
            raise ValueError(f"{x.shape[0]} rows in the batch, {len(self.names)} routed")
        result = layer.base_layer(x, *args, **kwargs)
        names = [n for n in dict.fromkeys(n for n, _, _ in self.segments) if n in layer.lora_A]
        stack = self.stacked and len(names) > 1 and torch.is_grad_enabled()
        if stack and not _dropout(layer, names):
            return result + self._stacked(layer, names, x).to(result.dtype)
        for name, first, end in self.segments:
            if name not in layer.lora_A:
                continue
            rows = x[first:end].to(layer.lora_A[name].weight.dtype)
            lora = layer.lora_B[name](layer.lora_A[name](layer.lora_dropout[name](rows)))
            result[first:end] += (lora * layer.scaling[name]).to(result.dtype)
        return result

    def _stacked(self, layer: Any, names: list[str], x: torch.Tensor) -> torch.Tensor:
        """Every row's low-rank product in two: ``x`` times all the adapters' A stacked, each
        row's columns of other adapters zeroed, times their B (scaled) side by side. Per run,
        each LoRA product and its backward would be several small operations and casts (about a
        quarter of a joint update's pass under bf16 autocast); this costs as many products as
        adapters, in two calls."""
        a = torch.cat([layer.lora_A[n].weight for n in names])  # (sum of ranks, H)
        b = torch.cat([layer.lora_B[n].weight * layer.scaling[n] for n in names], dim=1)
        low = torch.nn.functional.linear(x.to(a.dtype), a)  # (rows, ..., sum of ranks)
        mask = self._mask(names, [layer.lora_A[n].weight.shape[0] for n in names], low)
        return torch.nn.functional.linear(low * mask, b)

    def _mask(self, names: list[str], ranks: list[int], like: torch.Tensor) -> torch.Tensor:
        """(rows, 1, ..., sum of ranks): 1 where a row's own adapter's columns are, else 0."""
        key = (tuple(names), tuple(ranks), like.dtype, like.device, like.dim())
        if key not in self._masks:
            mask = torch.zeros(len(self.names), sum(ranks), dtype=like.dtype, device=like.device)
            starts = itertools.accumulate(ranks, initial=0)
            columns = {n: (start, start + r) for n, start, r in zip(names, starts, ranks)}
            for name, first, end in self.segments:
                if name in columns:
                    mask[first:end, columns[name][0] : columns[name][1]] = 1
            shape = (len(self.names),) + (1,) * (like.dim() - 2) + (sum(ranks),)
            self._masks[key] = mask.view(shape)
        return self._masks[key]


def _dropout(layer: Any, names: list[str]) -> bool:
    """Whether any of the adapters drops out in this pass (stacking would share one draw)."""
    return any(
        isinstance(layer.lora_dropout[n], torch.nn.Dropout) and layer.lora_dropout[n].training
        for n in names
    )


class AdapterPool:
    """N policies (one LoRA adapter + one optimizer each) over one frozen base model."""

    def __init__(self, base: BaseModel) -> None:
        self.base = base
        self._model: PeftModel | None = None
        self._lora: dict[str, LoraSettings] = {}
        self._optimizers: dict[str, torch.optim.AdamW] = {}

    @property
    def model(self) -> PeftModel:
        """The peft-wrapped base; its active adapter is the one last activated."""
        if self._model is None:
            raise KeyError("no adapter yet: call add(name) first")
        return self._model

    @property
    def names(self) -> list[str]:
        return list(self._lora)

    def __contains__(self, name: object) -> bool:
        return name in self._lora

    def add(
        self,
        name: str,
        lora: LoraSettings = LoraSettings(),
        optimizer: OptimizerSettings = OptimizerSettings(),
        *,
        seed: int | None = None,
    ) -> None:
        """Adds node ``name``'s adapter (initialised from ``seed``, else the global RNG) and its
        optimizer. Leaves the active adapter as it was (the new one, for the first)."""
        if not _ADAPTER_NAME.match(name):
            raise ValueError(f"adapter name {name!r}: use 1-64 letters, digits, '_' or '-'")
        if name in self._lora:
            raise ValueError(f"adapter {name!r} already exists")
        with (
            torch.random.fork_rng(devices=[], enabled=seed is not None),
            warnings.catch_warnings(),
        ):
            # peft 0.21 asks transformers 5.x a deprecated question; nothing for a user to do
            warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated")
            if seed is not None:
                torch.manual_seed(seed)
            if self._model is None:
                self._model = get_peft_model(self.base.model, lora.to_peft(), adapter_name=name)
            else:
                self._model.add_adapter(name, lora.to_peft())
        self._lora[name] = lora
        params = list(self.adapter_parameters(name).values())
        self._optimizers[name] = torch.optim.AdamW(
            params,
            lr=optimizer.lr,
            betas=optimizer.betas,
            weight_decay=optimizer.weight_decay,
            eps=optimizer.eps,
        )

    @contextmanager
    def activate(self, name: str) -> Iterator[PeftModel]:
        """Makes ``name``'s adapter the active (and only trainable) one; restores the previous."""
        self._require(name)
        previous = self.model.active_adapter
        self.model.set_adapter(name)
        try:
            yield self.model
        finally:
            self.model.set_adapter(previous)

    @contextmanager
    def rows(
        self, names: Sequence[str | None], *, trainable: bool = False, stacked: bool = True
    ) -> Iterator[RowAdapters]:
        """Routes each batch row of ``self.model``'s forward passes through its own adapter
        (``None``: the base alone) until the block ends. With ``trainable`` the named adapters'
        parameters take gradients meanwhile; requires_grad flags are restored after.
        ``stacked=False`` keeps passes with gradients run by run (``RowAdapters``; for
        benchmarks)."""
        routing = RowAdapters(names, stacked=stacked)
        adapters = sorted({n for n in names if n})
        params = [p for n in adapters for p in self.adapter_parameters(n).values()]
        flags = [p.requires_grad for p in params]
        layers = [m for m in self.model.modules() if isinstance(m, LoraLayer)]
        try:
            for layer in layers:
                # an instance attribute shadows the class's forward until deleted
                layer.forward = functools.partial(routing.forward, layer)
            for p in params:
                p.requires_grad_(trainable)
            yield routing
        finally:
            for layer in layers:
                layer.__dict__.pop("forward", None)
            for p, flag in zip(params, flags, strict=True):
                p.requires_grad_(flag)

    @contextmanager
    def reference(self) -> Iterator[PreTrainedModel]:
        """The base model without any adapter, e.g. for a KL reference's log-probs."""
        if self._model is None:
            yield self.base.model
            return
        with self._model.disable_adapter():
            yield self._model

    def optimizer(self, name: str) -> torch.optim.AdamW:
        self._require(name)
        return self._optimizers[name]

    def lora_settings(self, name: str) -> LoraSettings:
        self._require(name)
        return self._lora[name]

    def adapter_parameters(self, name: str) -> dict[str, torch.nn.Parameter]:
        """``name``'s LoRA parameters, sorted, keyed as peft saves them (adapter name removed),
        e.g. ``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight``."""
        self._require(name)
        found = {}
        for key, param in self.model.named_parameters():
            parts = key.split(".")
            # peft names a LoRA weight <module path>.lora_A.<adapter>.weight: the adapter's name
            # is the part after a lora_* part (it may also be a module path's part, e.g. "mlp")
            at = next(
                (i for i in range(len(parts) - 1) if parts[i].startswith("lora_")), None
            )
            if at is not None and parts[at + 1] == name:
                found[".".join(parts[: at + 1] + parts[at + 2 :])] = param
        return dict(sorted(found.items()))

    def adapter_state(self, name: str) -> dict[str, torch.Tensor]:
        """A detached copy of ``name``'s adapter weights (what a checkpoint stores)."""
        return {k: p.detach().clone() for k, p in self.adapter_parameters(name).items()}

    def load_adapter_state(self, name: str, state: dict[str, torch.Tensor]) -> None:
        """Copies ``state`` into ``name``'s adapter. Raises ``ValueError`` naming the first key
        that is missing, unexpected or of another shape (then nothing is changed)."""
        params = self.adapter_parameters(name)
        missing, unexpected = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        if missing or unexpected:
            raise ValueError(
                f"adapter {name!r}: {len(missing)} weights missing (first: {missing[:1]}), "
                f"{len(unexpected)} unexpected (first: {unexpected[:1]})"
            )
        for key, param in params.items():
            if tuple(state[key].shape) != tuple(param.shape):
                raise ValueError(
                    f"adapter {name!r}: {key} has shape {tuple(state[key].shape)}, "
                    f"the model expects {tuple(param.shape)}"
                )
        with torch.no_grad():
            for key, param in params.items():
                param.copy_(state[key])

    @contextmanager
    def borrowed(self, lora: LoraSettings, state: dict[str, torch.Tensor]) -> Iterator[PeftModel]:
        """Activates a peer's adapter ``state`` of shape ``lora`` (loaded into a scratch adapter,
        never trained); ``ValueError`` when the shape does not fit the base or the state does not
        fit the shape. One scratch adapter at most: one of another shape is removed first, so
        peers naming ever new shapes cannot fill the memory."""
        name = _borrowed_name(lora)
        for other in [n for n in self._lora if n.startswith(_BORROWED) and n != name]:
            self.remove(other)
        if name not in self._lora:
            self.add(name, lora, seed=0)
        self.load_adapter_state(name, state)
        with self.activate(name) as model:
            yield model

    def remove(self, name: str) -> None:
        """Drops ``name``'s adapter and optimizer (not the active one)."""
        self._require(name)
        if self.model.active_adapter == name:
            raise ValueError(f"adapter {name!r} is active: activate another before removing it")
        self.model.delete_adapter(name)
        del self._lora[name], self._optimizers[name]

    def _require(self, name: str) -> None:
        if name not in self._lora:
            raise KeyError(f"no adapter {name!r} (have: {', '.join(self._lora) or 'none'})")


def base_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s own weights as they were before peft injected LoRA layers into it in place
    (LoRA weights left out, ``.base_layer.`` removed from the names)."""
    return {
        key.replace(".base_layer.", "."): value
        for key, value in model.state_dict().items()
        if ".lora_" not in key
    }


def _borrowed_name(lora: LoraSettings) -> str:
    """The scratch adapter of one LoRA shape (a valid adapter name no node can have: nodes are
    named by address or plain words)."""
    shape = f"{lora.rank}/{lora.alpha}/{','.join(sorted(lora.target_modules))}"
    return _BORROWED + hashlib.sha256(shape.encode()).hexdigest()[:16]
