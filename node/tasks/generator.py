"""The one place that talks to reasoning-gym: dataset lookup, item generation and scorers.

Everything else in ``node.tasks`` goes through these functions, so the generator library (and its
quirks) is wrapped once:

- items are generated with ``reasoning_gym.create_dataset(name, seed=seed, size=n, **config)``;
  every dataset this project uses seeds item ``idx`` with ``random.Random(seed + idx)``, so the
  output depends only on (name, config, seed, idx), not on the process or ``PYTHONHASHSEED``;
- some generators print to stdout while generating (``bf``'s compiler prints a dot per
  optimisation pass), so generation runs with stdout redirected, under a lock because the
  redirection swaps ``sys.stdout`` for the whole process. Generating takes microseconds; anything
  another thread prints to stdout in that window is dropped (logging goes to stderr);
- answers are untrusted text from other peers and a few scorers ``eval`` them: only scorers
  listed as reviewed in ``safe_scorers`` run, with safe replacements where needed;
- a dataset's scorer can depend on its config (``decimal_arithmetic`` reads its precision from
  it), so scorers are dataset instances built with the item's config, cached per (name, config).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import threading
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import version
from typing import Any

import reasoning_gym
from reasoning_gym.factory import DATASETS

from node.tasks.errors import UnsafeScorer
from node.tasks.safe_scorers import REVIEWED_SCORERS, SAFE_SCORERS

GENERATOR_PACKAGE = "reasoning-gym"

# Keyword arguments that task derivation sets itself; a preset's config may not contain them.
RESERVED_CONFIG_KEYS = frozenset({"seed", "size"})

_GENERATE_LOCK = threading.Lock()


def generator_id() -> str:
    """``"reasoning-gym==<installed version>"``, as named in a batch's ``tasks.generator``.

    Read from the installed distribution: the package's ``__version__`` attribute is wrong.
    """
    return f"{GENERATOR_PACKAGE}=={version(GENERATOR_PACKAGE)}"


def known_datasets() -> list[str]:
    """Names of every dataset the installed reasoning-gym registers, sorted."""
    return sorted(DATASETS)


def config_fields(dataset: str) -> list[str]:
    """The keys a preset may set for ``dataset`` (its config dataclass fields but seed and size)."""
    _, config_cls = DATASETS[dataset]
    return sorted(
        f.name for f in dataclasses.fields(config_cls) if f.name not in RESERVED_CONFIG_KEYS
    )


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical JSON of a dataset config (sorted keys, no spaces): a cache key and a hash input."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)


def generate(dataset: str, config: Mapping[str, Any], seed: int, size: int = 1) -> list[dict]:
    """Items ``0..size-1`` of ``create_dataset(dataset, seed=seed, size=size, **config)``.

    Each item is reasoning-gym's dict: ``question``, ``answer`` (``str`` or ``None``), ``metadata``.
    """
    with _GENERATE_LOCK, contextlib.redirect_stdout(io.StringIO()):
        ds = reasoning_gym.create_dataset(dataset, seed=seed, size=size, **config)
        return [ds[i] for i in range(size)]


def score(dataset: str, config: Mapping[str, Any], answer: str, entry: dict) -> float:
    """The dataset's own ``score_answer(answer, entry)``; may raise whatever the scorer raises.

    Only reviewed scorers run (``safe_scorers``): a dataset with a safe replacement uses it, any
    other unreviewed one raises ``UnsafeScorer`` (presets cannot contain them anyway).
    """
    if dataset in SAFE_SCORERS:
        return SAFE_SCORERS[dataset](answer, entry)
    if dataset not in REVIEWED_SCORERS:
        raise UnsafeScorer(f"{dataset}'s scorer is not reviewed for untrusted answers")
    return _scorer(dataset, config_key(config)).score_answer(answer, entry)


@lru_cache(maxsize=256)
def _scorer(dataset: str, key: str) -> Any:
    config = json.loads(key)
    with _GENERATE_LOCK, contextlib.redirect_stdout(io.StringIO()):
        return reasoning_gym.create_dataset(dataset, seed=0, size=1, **config)
