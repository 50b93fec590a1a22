"""How much memory and disk a node's settings need, estimated from SmolLM2-135M's measured figures.

The estimate (``estimate_resources``) is a small formula, fitted to what docs/BENCHMARKS.md's
*Policy* benchmarks measured for SmolLM2-135M-Instruct on the CPU (float32, LoRA r 16 on the
attention projections, one GRPO step in a fresh process):

- peak RSS of a GRPO step grows with the tokens of one micro-batch: 3.0 GiB for 8 sequences of
  ~153 tokens (1,224 tokens), 1.74 GiB for micro-batches of 2 (306 tokens). A line through both
  points: ``1.32 GiB + 1.37 MiB per token``; the 1.32 GiB is the process with the model loaded
  (torch, the 0.54 GB of float32 weights, tokenizer, LoRA, optimizer).
- generation holds a key/value cache of 46,080 bytes per token (30 layers x key and value x 3
  key/value heads x 64 dimensions x 4 bytes) for up to 64 sequences decoded together (the
  sampler's ``max_batch_sequences``, at least one group of G), each ``prompt + max_new_tokens``
  long (prompts: 160 tokens allowed, the few-shot prompts are ~140), plus three vocabulary-sized
  float32 rows per sequence for the last logits, their softmax and the top-p sort.
- the node's peak is the process plus the larger of the two phases (they never overlap).

Disk: a checkpoint holds the LoRA weights and AdamW's two moments (3 x 4 bytes per adapter
parameter; r 16 on SmolLM2 is 1.84 M parameters, 22 MB), twice while a save swaps its snapshot;
a local store folder keeps every batch put in it, up to the protocol's 1 MiB each: room for 1,000
is asked for.

Another model (a folder) is scaled by its parameter count, read from the size of its weight files
and the dtype of its ``config.json``: the process grows by the weights, the per-token figures and
the adapter in proportion (for the adapter, an upper bound). That is rough for a model of another
shape, and all of it is CPU memory: on a GPU the activations are the GPU's. Nothing here imports
torch.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from node.defaults import SHIPPED_MODEL

GIB = 1024**3
MIB = 1024**2

#: SmolLM2-135M-Instruct: parameters, layers and sizes of the projections LoRA adapts.
SMOL_PARAMETERS = 134_515_008
SMOL_LAYERS = 30
SMOL_LORA_WIDTHS = (576 + 576) + (576 + 192) + (576 + 192) + (576 + 576)  # q, k, v, o: in + out
SMOL_VOCABULARY = 49_152
#: Measured (docs/BENCHMARKS.md, Policy): the process with the model, and a GRPO step's growth.
PROCESS_BYTES = int(1.32 * GIB)
STEP_BYTES_PER_TOKEN = int(1.37 * MIB)
#: Generation: key/value cache per token, float32 (see the module docstring).
KV_BYTES_PER_TOKEN = SMOL_LAYERS * 2 * 3 * 64 * 4
LOGIT_BYTES_PER_SEQUENCE = 3 * SMOL_VOCABULARY * 4
GENERATION_BATCH = 64
PROMPT_TOKENS = 160
#: A random two-layer Llama (``model.source = "tiny"``): the shipped vocabulary, width 64.
TINY_PARAMETERS = 2 * SMOL_VOCABULARY * 64 + 2 * 50_000
#: Disk: blobs a local store folder should have room for, at the protocol's 1 MiB cap.
STORE_BLOBS = 1_000
STORE_BLOB_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Workload:
    """The settings that decide a node's memory and disk (from its ``NodeConfig``)."""

    parameters: int
    tasks_per_round: int
    group_size: int
    trained_groups: int
    max_new_tokens: int
    micro_batch_size: int
    lora_rank: int
    prompt_tokens: int = PROMPT_TOKENS


@dataclass(frozen=True)
class Estimate:
    """Bytes a node needs: peak memory (and its two phases) and disk per folder."""

    memory: int
    generation: int
    training: int
    checkpoint_disk: int
    store_disk: int

    def summary(self) -> str:
        return (
            f"{self.memory / GIB:.1f} GiB (generation {self.generation / GIB:.1f}, "
            f"GRPO step {self.training / GIB:.1f}, on top of the process)"
        )


def estimate_resources(work: Workload) -> Estimate:
    """Peak memory and disk of a node doing ``work`` (the formula of this module's docstring)."""
    scale = work.parameters / SMOL_PARAMETERS
    process = PROCESS_BYTES - SMOL_PARAMETERS * 4 + work.parameters * 4
    sequence = work.prompt_tokens + work.max_new_tokens
    decoded = max(GENERATION_BATCH, work.group_size)
    decoded = min(decoded, work.tasks_per_round * work.group_size)
    generation = int(
        decoded * (sequence * KV_BYTES_PER_TOKEN + LOGIT_BYTES_PER_SEQUENCE) * scale
    )
    trained = min(work.micro_batch_size, work.trained_groups * work.group_size)
    training = int(trained * sequence * STEP_BYTES_PER_TOKEN * scale)
    lora_parameters = SMOL_LAYERS * work.lora_rank * SMOL_LORA_WIDTHS * max(1.0, scale)
    checkpoint = int(2 * 3 * 4 * lora_parameters)
    return Estimate(
        memory=process + max(generation, training),
        generation=generation,
        training=training,
        checkpoint_disk=checkpoint,
        store_disk=STORE_BLOBS * STORE_BLOB_BYTES,
    )


def model_parameters(source: str) -> int | None:
    """Parameters of ``model.source``: known for the shipped and tiny models, read from a
    folder's weight files and ``config.json`` dtype; None when it cannot be told (a hub id)."""
    if source == SHIPPED_MODEL:
        return SMOL_PARAMETERS
    if source == "tiny":
        return TINY_PARAMETERS
    folder = Path(source).expanduser()
    weights = [*folder.glob("*.safetensors"), *folder.glob("*.bin")]
    if not folder.is_dir() or not weights:
        return None
    size = sum(path.stat().st_size for path in weights)
    return size // _bytes_per_parameter(folder / "config.json")


def _bytes_per_parameter(config_file: Path) -> int:
    try:
        dtype = json.loads(config_file.read_text(encoding="utf-8")).get("torch_dtype")
    except (OSError, ValueError, AttributeError):
        dtype = None
    return 2 if dtype in ("bfloat16", "float16") else 4


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Bytes of memory available to a new process (Linux ``MemAvailable``); None elsewhere."""
    try:
        lines = meminfo.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, rest = line.partition(":")
        if name == "MemAvailable":
            return int(rest.split()[0]) * 1024  # kB
    return None


def free_disk(path: Path) -> int:
    """Free bytes on the file system that holds ``path`` (or its nearest existing parent)."""
    probe = path.expanduser().absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free
