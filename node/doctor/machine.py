"""Memory and disk for the configured model, group size and token limit (node.resources)."""

from __future__ import annotations

from pathlib import Path

from node.config import NodeConfig
from node.doctor.base import Check, Run, ok, problem, skipped
from node.resources import GIB, Workload, estimate_resources, model_parameters


def workload(config: NodeConfig) -> Workload | None:
    """The settings that decide memory and disk; None when the model's size cannot be told."""
    parameters = model_parameters(config.model.source)
    if parameters is None:
        return None
    tasks = config.tasks.tasks_per_round
    if tasks is None:
        from node.tasks.presets import get_preset  # reasoning-gym: loads only here

        tasks = get_preset(config.tasks.preset).tasks_per_round
    sampling = config.sampling
    return Workload(
        parameters=parameters,
        tasks_per_round=tasks,
        group_size=sampling.group_size,
        trained_groups=sampling.local_groups + sampling.external_groups,
        max_new_tokens=config.generation.max_new_tokens,
        micro_batch_size=config.training.micro_batch_size,
        lora_rank=config.training.lora_rank,
    )


def check_memory(run: Run) -> Check:
    work = workload(run.config)
    if work is None:
        return skipped("memory", f"cannot tell the size of model {run.config.model.source!r}")
    estimate = estimate_resources(work)
    available = run.probes.memory_available()
    settings = (
        f"G {work.group_size}, {work.tasks_per_round} tasks, max_new_tokens "
        f"{work.max_new_tokens}, micro_batch_size {work.micro_batch_size}"
    )
    if available is None:
        return skipped("memory", f"needs ~{estimate.summary()}; cannot read free memory here")
    if estimate.memory > available:
        return problem(
            "memory",
            f"{settings} need ~{estimate.summary()}, {available / GIB:.1f} GiB is available",
            "lower [training] micro_batch_size, [generation] max_new_tokens or [sampling] "
            "group_size, or free memory",
        )
    return ok("memory", f"{settings} need ~{estimate.memory / GIB:.1f} GiB of "
              f"{available / GIB:.1f} GiB available")  # fmt: skip


def check_disk(run: Run) -> Check:
    work = workload(run.config)
    if work is None:
        return skipped("disk", f"cannot tell the size of model {run.config.model.source!r}")
    estimate = estimate_resources(work)
    needs = [(run.config.model.checkpoint_dir, estimate.checkpoint_disk, "[model] checkpoint_dir")]
    setting = run.config.storage.store
    if "://" not in setting or setting.startswith("file://"):
        folder = Path(setting.removeprefix("file://"))
        needs.append((folder, estimate.store_disk, "[storage] store"))
    lacking = [
        (path, need, key)
        for path, need, key in needs
        if run.probes.disk_free(path.expanduser()) < need
    ]
    if lacking:
        path, need, key = lacking[0]
        return problem(
            "disk",
            f"{path} needs {need / 2**20:,.0f} MiB free, has "
            f"{run.probes.disk_free(path.expanduser()) / 2**20:,.0f} MiB",
            f"free space there or set {key} to a folder on a disk with room",
        )
    listed = ", ".join(f"{path} {need / 2**20:,.0f} MiB" for path, need, _ in needs)
    return ok("disk", f"room for {listed}")
