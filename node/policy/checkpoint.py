"""A node's policy checkpoint: adapter, optimizer, RNG streams and round, saved atomically.

Layout of a node's checkpoint folder (one writer at a time)::

    CURRENT                     the name of the complete snapshot to load (LevelDB's habit)
    round-00000042-1f2e3d4c/    the snapshot CURRENT names
        adapter_model.safetensors  adapter_config.json   (peft's format: PeftModel.from_pretrained
                                                          can open the folder on its own)
        optimizer.pt            AdamW state of that adapter only
        rng.pt                  python random, numpy, torch CPU (and CUDA) generator states
        checkpoint.json         written last: format, round, base model, LoRA settings, caller's
                                metadata, and the SHA-256 of every other file

Saving writes a ``.staging-*`` folder, fsyncs it, renames it to ``round-*``, then replaces
``CURRENT`` with ``os.replace``; only after that are older snapshots removed. A crash at any point
leaves ``CURRENT`` naming the previous complete snapshot (leftovers are swept by the next save).

Several nodes saved one after another (the experiment runner) cannot be saved atomically together:
a kill between two saves leaves some nodes a round ahead. Such a caller saves with
``keep_previous=True`` (the snapshot ``CURRENT`` named stays too) and, on resume, calls
``rewind_checkpoint`` to make every node's snapshot of the last round all of them finished current
again, removing the later ones.

Loading returns ``None`` when the folder holds no checkpoint yet, and raises ``CheckpointError``
when it holds one that cannot be used: damaged (a missing file, a checksum mismatch, unreadable
JSON), saved from another base model (another name, or weights of other shapes), or for a
different LoRA configuration than the adapter already in the pool. Everything is checked before
anything is changed; only an adapter that ``load_checkpoint`` itself added stays added.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from node.policy.adapters import AdapterPool, LoraSettings
from node.policy.errors import CheckpointError

FORMAT = "swarm.policy-checkpoint/1"
POINTER = "CURRENT"
MANIFEST = "checkpoint.json"
ADAPTER_FILE = "adapter_model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng.pt"
_SNAPSHOT = re.compile(r"^round-\d{8,}-[0-9a-f]{8}$")


@dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint says about itself (``checkpoint.json``)."""

    path: Path
    round: int
    base_model: str
    adapter: str
    lora: LoraSettings
    meta: dict[str, Any] = field(default_factory=dict)


def save_checkpoint(
    directory: Path,
    pool: AdapterPool,
    name: str,
    *,
    round: int,
    meta: Mapping[str, Any] | None = None,
    keep_previous: bool = False,
) -> Path:
    """Saves node ``name``'s adapter, optimizer, the RNG states and ``round`` (plus ``meta``,
    JSON-serialisable) as the current checkpoint in ``directory``; returns the snapshot folder.

    Older snapshots are removed afterwards, except, with ``keep_previous``, the one that was
    current until now (for ``rewind_checkpoint``)."""
    if round < 0:
        raise ValueError(f"round must be >= 0, got {round}")
    lora = pool.lora_settings(name)
    meta_json = json.loads(json.dumps(dict(meta or {})))  # fail now if not JSON, not mid-write
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    previous = _current_name(directory) if keep_previous else None
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=directory))
    final = directory / f"round-{round:08d}-{uuid.uuid4().hex[:8]}"
    try:
        adapter = {
            k: v.detach().to("cpu").contiguous() for k, v in pool.adapter_state(name).items()
        }
        save_file(adapter, staging / ADAPTER_FILE, metadata={"format": "pt"})
        peft_config = lora.to_peft()
        peft_config.base_model_name_or_path = pool.base.name
        peft_config.save_pretrained(str(staging))
        torch.save(pool.optimizer(name).state_dict(), staging / OPTIMIZER_FILE)
        torch.save(_rng_state(), staging / RNG_FILE)
        files = sorted(p.name for p in staging.iterdir())
        manifest = {
            "format": FORMAT,
            "round": round,
            "base_model": pool.base.name,
            "adapter": name,
            "lora": lora.to_dict(),
            "meta": meta_json,
            "sha256": {f: _sha256(staging / f) for f in files},
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        for f in [*files, MANIFEST]:
            _fsync_file(staging / f)
        staging.rename(final)
        _fsync_dir(directory)
        _replace_pointer(directory, final.name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if final.exists() and _current_name(directory) != final.name:
            shutil.rmtree(final, ignore_errors=True)
        raise
    _sweep(directory, keep={final.name, previous or final.name})
    return final


def read_checkpoint(directory: Path) -> CheckpointInfo | None:
    """The current checkpoint's description, checksums verified; ``None`` if there is none."""
    snapshot = _current_snapshot(Path(directory))
    if snapshot is None:
        return None
    return _describe(snapshot)


def rewind_checkpoint(directory: Path, round: int) -> CheckpointInfo | None:
    """Makes the snapshot of ``round`` the current checkpoint and removes every snapshot of a later
    round (the rounds to be redone), so that the next save cannot keep a stale one.

    Returns ``None`` (and changes nothing) when ``directory`` holds no snapshot of ``round``.
    """
    directory = Path(directory)
    found = [info for info in _snapshots(directory) if info.round == round]
    if not found:
        return None
    current = _current_name(directory)
    target = next((info for info in found if info.path.name == current), None)
    if target is None:
        if len(found) > 1:
            names = ", ".join(info.path.name for info in found)
            raise CheckpointError(f"{directory} holds several snapshots of round {round}: {names}")
        target = found[0]
        _replace_pointer(directory, target.path.name)
    for entry in directory.iterdir():
        if _SNAPSHOT.match(entry.name) and int(entry.name.split("-")[1]) > round:
            shutil.rmtree(entry, ignore_errors=True)
    return target


def _snapshots(directory: Path) -> list[CheckpointInfo]:
    """Every complete, undamaged snapshot folder in ``directory``, whether current or not."""
    found = []
    for entry in sorted(directory.iterdir()) if directory.is_dir() else []:
        if entry.is_dir() and _SNAPSHOT.match(entry.name):
            try:
                found.append(_describe(entry))
            except CheckpointError:
                continue
    return found


def _describe(snapshot: Path) -> CheckpointInfo:
    manifest = _read_manifest(snapshot)
    try:
        return CheckpointInfo(
            path=snapshot,
            round=int(manifest["round"]),
            base_model=str(manifest["base_model"]),
            adapter=str(manifest["adapter"]),
            lora=LoraSettings.from_dict(manifest["lora"]),
            meta=dict(manifest.get("meta") or {}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{snapshot / MANIFEST} is malformed: {exc!r}") from None


def load_checkpoint(
    directory: Path, pool: AdapterPool, name: str, *, restore_rng: bool = True
) -> CheckpointInfo | None:
    """Restores node ``name`` from ``directory``: adapter weights, optimizer state and (unless
    ``restore_rng`` is false, e.g. for several nodes in one process) the global RNG states.

    Adds the adapter to ``pool`` with the checkpoint's LoRA settings if it is not there yet.
    Returns ``None`` (and changes nothing) when ``directory`` holds no checkpoint.
    """
    info = read_checkpoint(directory)
    if info is None:
        return None
    where = info.path
    if info.base_model != pool.base.name:
        raise CheckpointError(
            f"{where} was trained on base model {info.base_model!r}, this node runs "
            f"{pool.base.name!r}: use the same model, or another checkpoint folder to start afresh"
        )
    if name in pool and pool.lora_settings(name) != info.lora:
        raise CheckpointError(
            f"{where} holds a LoRA adapter {info.lora}, the pool's {name!r} is "
            f"{pool.lora_settings(name)}: configure the same LoRA settings"
        )
    adapter = _load(where / ADAPTER_FILE, lambda p: load_file(p, device="cpu"))
    optimizer_state = _load(where / OPTIMIZER_FILE, _torch_load)
    rng = _load(where / RNG_FILE, _torch_load)

    if name not in pool:
        pool.add(name, info.lora)
    try:
        _check_optimizer_state(optimizer_state, pool, name)
        pool.load_adapter_state(name, adapter)  # checks every key and shape before copying
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{where} does not fit this model ({exc}); was it saved from another base model?"
        ) from None
    pool.optimizer(name).load_state_dict(optimizer_state)
    if restore_rng:
        _set_rng_state(rng, where)
    return info


# ---------------------------------------------------------------- pointer and snapshots


def _current_name(directory: Path) -> str | None:
    try:
        return (directory / POINTER).read_text().strip()
    except FileNotFoundError:
        return None


def _current_snapshot(directory: Path) -> Path | None:
    if not directory.is_dir():
        return None
    current = _current_name(directory)
    if current is None:
        return None
    snapshot = directory / current
    if not _SNAPSHOT.match(current) or not snapshot.is_dir():
        raise CheckpointError(
            f"{directory / POINTER} names {current!r}, which is not a snapshot folder there: "
            "the checkpoint folder is damaged; move it aside to start afresh"
        )
    return snapshot


def _replace_pointer(directory: Path, snapshot: str) -> None:
    temporary = directory / f".{POINTER}.{uuid.uuid4().hex[:8]}"
    temporary.write_text(snapshot + "\n")
    _fsync_file(temporary)
    os.replace(temporary, directory / POINTER)
    _fsync_dir(directory)


def _sweep(directory: Path, *, keep: set[str]) -> None:
    """Removes snapshots not in ``keep`` and leftovers of interrupted saves."""
    for entry in directory.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and (_SNAPSHOT.match(entry.name) or entry.name.startswith(".staging-")):
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.is_file() and entry.name.startswith(f".{POINTER}."):
            entry.unlink(missing_ok=True)


def _read_manifest(snapshot: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((snapshot / MANIFEST).read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{snapshot} has no {MANIFEST}: incomplete snapshot") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{snapshot / MANIFEST} is unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise CheckpointError(f"{snapshot / MANIFEST}: format {found!r}, expected {FORMAT!r}")
    checksums = manifest.get("sha256")
    if not isinstance(checksums, dict) or not {ADAPTER_FILE, OPTIMIZER_FILE, RNG_FILE} <= set(
        checksums
    ):
        raise CheckpointError(f"{snapshot / MANIFEST} does not list the checkpoint's files")
    for file, digest in checksums.items():
        path = snapshot / Path(file).name
        if not path.is_file():
            raise CheckpointError(f"{path} is missing: the checkpoint is damaged")
        if _sha256(path) != digest:
            raise CheckpointError(f"{path} does not match its checksum: the checkpoint is damaged")
    return manifest


def _load(path: Path, reader: Any) -> Any:
    try:
        return reader(path)
    except Exception as exc:  # unpickling, zip and safetensors errors of all kinds
        raise CheckpointError(f"{path} cannot be read: {exc}") from None


def _torch_load(path: Path) -> Any:
    """Plain data and tensors only (no code), onto the CPU (the optimizer moves its state)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def _check_optimizer_state(state: Any, pool: AdapterPool, name: str) -> None:
    """Raises ``ValueError`` unless ``state`` is an AdamW state for exactly this adapter."""
    params = list(pool.adapter_parameters(name).values())
    groups = state.get("param_groups") if isinstance(state, dict) else None
    if not isinstance(groups, list) or sum(len(g["params"]) for g in groups) != len(params):
        raise ValueError(f"the optimizer state is not for {len(params)} adapter parameters")
    for index, entry in state.get("state", {}).items():
        for key in ("exp_avg", "exp_avg_sq"):
            if key in entry and tuple(entry[key].shape) != tuple(params[int(index)].shape):
                raise ValueError(f"optimizer {key} of parameter {index} has another shape")


# ---------------------------------------------------------------- RNG states


def _rng_state() -> dict[str, Any]:
    version, state, gauss = random.getstate()
    rng: dict[str, Any] = {
        "python": [version, list(state), gauss],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - transformers depends on numpy
        return rng
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    rng["numpy"] = [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached]
    return rng


def _set_rng_state(rng: dict[str, Any], where: Path) -> None:
    try:
        cuda = rng["cuda"] if torch.cuda.is_available() else []
        if cuda and len(cuda) != torch.cuda.device_count():
            raise ValueError(f"{len(cuda)} CUDA generators saved, {torch.cuda.device_count()} here")
        version, state, gauss = rng["python"]
        random.setstate((version, tuple(state), gauss))
        torch.set_rng_state(rng["torch"])
        if cuda:
            torch.cuda.set_rng_state_all(cuda)
        if "numpy" in rng:
            import numpy as np

            kind, keys, pos, has_gauss, cached = rng["numpy"]
            np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{where / RNG_FILE} holds no usable RNG state: {exc}") from None


# ---------------------------------------------------------------- files


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_file(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(directory: Path) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows cannot open a folder
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
