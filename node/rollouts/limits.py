"""Limits of the ``swarm.rollouts/3`` document; a receiver rejects a batch above any of them.

The first four come from the v1 protocol; the string limits are this implementation's choice (v1
was silent). All are part of the wire format (docs/PROTOCOL.md, "Limits"): a batch that
exceeds one is rejected by every node running this code, so raise them only everywhere at once.
"Characters" are Unicode code points (Python's ``len`` of the decoded string).
"""

from __future__ import annotations

SCHEMA = "swarm.rollouts/3"

# --- v1 protocol ---
MAX_GROUPS = 64
MAX_COMPLETIONS_PER_GROUP = 32
MAX_COMPLETION_CHARS = 8192
MAX_BATCH_BYTES = 1024 * 1024  # the stored bytes, and what they decompress to

# --- chosen here ---
#: Most bytes a verifier reads of a committed batch. Above MAX_BATCH_BYTES so that a batch whose
#: bytes hash to the committed digest and exceed the limit is provably the publisher's fault
#: (flagged ``too_large``); a blob over this ceiling is not read, and proves nothing
#: (``fetch_failed``, never attested).
MAX_FETCH_BYTES = 4 * MAX_BATCH_BYTES
#: reasoning-gym dataset names are short identifiers ("basic_arithmetic").
MAX_DATASET_CHARS = 64
#: Generated questions; the longest reasoning-gym prompts (arc_1d, binary_matrix, bf) are a few
#: thousand characters at their larger settings.
MAX_QUESTION_CHARS = 8192
#: Reference answers (a matrix or a program output at most).
MAX_ANSWER_CHARS = 8192
#: A Hugging Face repository id or a local path.
MAX_MODEL_NAME_CHARS = 256
#: Preset names ("easy-arithmetic").
MAX_PRESET_CHARS = 64
#: "reasoning-gym==<version>".
MAX_GENERATOR_CHARS = 64
#: "swarm.sample/1".
MAX_SAMPLER_CHARS = 64
#: LoRA shapes a batch may declare: the adapter's bytes are bounded by MAX_ADAPTER_BYTES anyway.
MAX_LORA_RANK = 256
MAX_LORA_ALPHA = 2**16
MAX_LORA_TARGETS = 16
#: Token ids of one completion: a byte-level tokenizer spends at most one token per UTF-8 byte,
#: and a completion's text is at most MAX_COMPLETION_CHARS characters of at most 4 bytes; the
#: batch's 1 MiB bounds the total far below this anyway.
MAX_COMPLETION_TOKENS = 4 * MAX_COMPLETION_CHARS + 1
#: Token ids are below 2**32 (vocabularies are a few hundred thousand tokens at most).
MAX_TOKEN_ID = 2**32 - 1
#: Task index in the publisher's task list: a uint32, like the on-chain counts.
MAX_TASK_INDEX = 2**32 - 1
#: Rounds are uint64 (docs/PROTOCOL.md, "Units and encodings"); chain ids are kept to uint64 too.
MAX_UINT64 = 2**64 - 1
#: Deepest nesting of JSON arrays/objects accepted before parsing. The schema needs 7
#: (batch, body, groups, group, completions, completion, token_ids); anything deeper is rejected
#: up front.
MAX_JSON_DEPTH = 8
#: Longest integer literal accepted in the JSON (a uint64 has 20 digits).
MAX_INT_DIGITS = 20
