"""Which reasoning-gym scorers may judge untrusted answers, and safe replacements for the rest.

A verifier scores completions written by other peers, so an answer is untrusted text. Some
reasoning-gym 0.1.25 scorers pass it to ``eval`` or to ``sympy.parse_expr`` (which evals too):
``binary_matrix``, ``spiral_matrix``, ``string_insertion``, ``n_queens``, ``puzzle24``,
``countdown``, ``polynomial_multiplication``, ``simple_integration``, ``intermediate_integration``.
A peer could run any code on every node that verifies its batch. Hence an allow-list:

- ``REVIEWED_SCORERS``: datasets whose ``score_answer`` was read and found to treat the answer as
  data (string comparison, regex, ``float``/``Decimal``/``int`` parsing, a hand-written parser);
  presets may only use these (``PresetEntry`` refuses others) and nothing else is ever scored;
- ``SAFE_SCORERS``: replacements, used instead of the dataset's own scorer, that give the same
  result for every answer that is a plain literal and 0.0 where the original would have executed
  an expression.

Review a scorer before adding its dataset (``grep -n "eval(\\|exec(\\|parse_expr"`` is a start,
not a proof), and recheck all of them when reasoning-gym is upgraded.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Callable
from typing import Any


def score_binary_matrix(answer: str | None, entry: dict[str, Any]) -> float:
    """``binary_matrix``: 1.0 for the exact matrix text; 0.1 for the same matrix written as a
    Python list of lists (the original ``eval``s it; here ``ast.literal_eval``); else 0.0."""
    oracle = entry["answer"]
    if not isinstance(answer, str):
        return 0.0
    if answer == oracle:
        return 1.0
    try:
        with warnings.catch_warnings():  # "1abc" -> SyntaxWarning: invalid decimal literal
            warnings.simplefilter("ignore", SyntaxWarning)
            matrix = ast.literal_eval(answer)
        text = "\n".join(" ".join(str(x) for x in row) for row in matrix)
    except Exception:  # not a literal, not a list of iterables, too deep, ...
        return 0.0
    return 0.1 if text == oracle else 0.0


SAFE_SCORERS: dict[str, Callable[[str | None, dict[str, Any]], float]] = {
    "binary_matrix": score_binary_matrix,
}

REVIEWED_SCORERS = frozenset(
    {
        "arc_1d",  # ProceduralDataset's default: string equality / containment
        "base_conversion",  # default
        "basic_arithmetic",  # default (its eval runs on generated expressions only)
        "bf",  # default
        "binary_matrix",  # evals the answer: replaced by score_binary_matrix
        "calendar_arithmetic",  # string and int comparisons
        "decimal_arithmetic",  # Decimal parsing
        "fraction_simplification",  # regex without nested quantifiers, int parsing
        "propositional_logic",  # its own recursive-descent parser (quadratic: see scoring)
    }
)
