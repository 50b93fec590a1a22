"""Limits of the ``swarm.rollouts/1`` document; a receiver rejects a batch above any of them.

The first four come from PROTOCOL.md ("Batch document"); the string limits are this
implementation's choice (PROTOCOL is silent) and are part of the wire format: a batch that
exceeds one is rejected by every node running this code, so raise them only everywhere at once.
"Characters" are Unicode code points (Python's ``len`` of the decoded string).
"""

from __future__ import annotations

SCHEMA = "swarm.rollouts/1"

# --- PROTOCOL.md ---
MAX_GROUPS = 64
MAX_COMPLETIONS_PER_GROUP = 32
MAX_COMPLETION_CHARS = 8192
MAX_BATCH_BYTES = 1024 * 1024  # the stored bytes, and what they decompress to

# --- chosen here ---
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
#: Task index in the publisher's task list: a uint32, like the on-chain counts.
MAX_TASK_INDEX = 2**32 - 1
#: Rounds are uint64 (PROTOCOL "Units"); chain ids are kept to uint64 as well.
MAX_UINT64 = 2**64 - 1
#: Deepest nesting of JSON arrays/objects accepted before parsing. The schema needs 6
#: (batch, body, groups, group, completions, completion); anything deeper is rejected up front.
MAX_JSON_DEPTH = 8
#: Longest integer literal accepted in the JSON (a uint64 has 20 digits).
MAX_INT_DIGITS = 20
