"""The node's task layer: verifiable tasks from reasoning-gym (no torch, no transformers).

A peer's tasks for a round are a pure function of (round seed, peer address, preset), so any
verifier regenerates them, checks each group's question and reference answer, and re-scores every
completion with the dataset's own scorer (docs/PROTOCOL.md, "Task derivation").

Modules, one concern each:

- ``errors``      the exception family (``TaskError`` and its subclasses)
- ``generator``   the only module that calls reasoning-gym: generation, scorers, ``generator_id``
- ``safe_scorers``  the scorers reviewed for untrusted answers; replacements for ones that eval
- ``presets``     ``Preset``/``PresetEntry``, the shipped presets (``smol-strict``, ``paper-strict``, ``smol-easy``, ``paper``)
- ``derivation``  item seeds, the weighted dataset draw, ``TaskItem``, ``derive_tasks``, the
                  verifier's ``check_task_matches``
- ``scoring``     ``extract_answer`` and ``score_completion`` under the preset's rule (dataset or
                  strict; never raises)
- ``prompts``     ``build_messages``: the format, three demonstrations, the question

Example::

    from node.chain.rounds import round_seed
    from node.tasks import build_messages, derive_tasks, get_preset, score_completion

    preset = get_preset("smol-strict")
    tasks = derive_tasks(round_seed(genesis_seed, r), "0xAbC...", preset)
    messages = build_messages(tasks[0])            # -> the policy
    reward = score_completion(tasks[0], "... <answer>7</answer>", finish_reason="stop")
"""

from node.defaults import DEFAULT_PRESET_NAME
from node.tasks.derivation import (
    TaskItem,
    check_task_matches,
    derive_item_seed,
    derive_task,
    derive_tasks,
    draw_entry,
    peer_specialty,
)
from node.tasks.errors import InvalidTaskInput, TaskError, UnknownPreset, UnsafeScorer
from node.tasks.generator import generator_id
from node.tasks.presets import (
    PRESETS,
    Preset,
    PresetEntry,
    get_preset,
)
from node.tasks.prompts import SYSTEM_PROMPT, build_messages, demonstrations
from node.tasks.scoring import extract_answer, score_answer, score_completion, score_strict

__all__ = [
    "DEFAULT_PRESET_NAME",
    "PRESETS",
    "SYSTEM_PROMPT",
    "InvalidTaskInput",
    "Preset",
    "PresetEntry",
    "TaskError",
    "TaskItem",
    "UnknownPreset",
    "UnsafeScorer",
    "build_messages",
    "check_task_matches",
    "demonstrations",
    "derive_item_seed",
    "derive_task",
    "derive_tasks",
    "draw_entry",
    "peer_specialty",
    "extract_answer",
    "generator_id",
    "get_preset",
    "score_answer",
    "score_completion",
    "score_strict",
]
