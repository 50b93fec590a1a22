"""scripts/measure_task_mix.py without the model: its candidates draw real items, a generator
that never returns is cut off, and the measures of crafted groups are exact."""

from __future__ import annotations

from types import ModuleType

import pytest

from node.learning_data import GeneratedCompletion
from tests.scripts import load_script


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("measure_task_mix")


def test_every_candidate_draws_distinct_items(script: ModuleType) -> None:
    for name, (dataset, _) in script.CANDIDATES.items():
        tasks = script.candidate_tasks(name, 6, item_timeout=10.0)
        assert [t.dataset for t in tasks] == [dataset] * 6
        assert len({t.question for t in tasks}) > 1, name
        assert {t.scoring for t in tasks} == {"strict"}


def test_a_generator_that_never_returns_is_cut_off(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reasoning-gym's base_conversion with min_base = max_base = 2 never returns an item (it
    looks for a second, different base); the script reports such a candidate and goes on."""
    monkeypatch.setitem(
        script.CANDIDATES,
        "stuck",
        ("base_conversion", {"min_base": 2, "max_base": 2, "min_value": 0, "max_value": 15}),
    )
    with pytest.raises(script.ItemTimeout):
        script.candidate_tasks("stuck", 2, item_timeout=1.0)


def test_the_measures_of_crafted_groups(script: ModuleType) -> None:
    (task,) = script.candidate_tasks("add-1", 1, item_timeout=10.0)
    right = f"<answer>{task.answer}</answer>"
    group = [
        GeneratedCompletion(right, (1, 2), "stop"),  # strict 1, dataset 1
        GeneratedCompletion(right + " and more", (1, 2), "stop"),  # strict 0, dataset 1
        GeneratedCompletion(right, (1,), "length"),  # strict 0 (cut), dataset 1
        GeneratedCompletion("no idea", (1, 2), "stop"),  # 0 under both
    ]
    measured = script.measure([task], [group])
    assert measured == {
        "strict": 0.25, "dataset": 0.75, "signal": 1.0, "format": 0.25, "cut": 0.25,
    }  # fmt: skip
