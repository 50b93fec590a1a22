"""The held-out set and the evaluation of several nodes' adapters in shared passes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from node.experiment.evaluation import evaluate, heldout_seed, heldout_tasks  # noqa: E402
from node.policy.adapters import AdapterPool, LoraSettings  # noqa: E402
from node.policy.generation import SamplingConfig, generate_from_ids  # noqa: E402
from node.policy.model import BaseModel, encode_prompts, tiny_model  # noqa: E402
from node.tasks import build_messages, derive_tasks, get_preset  # noqa: E402
from node.tasks.scoring import strict_answer  # noqa: E402


def test_the_held_out_set_is_fixed_and_drawn_apart_from_training() -> None:
    first, again = heldout_tasks("smol-easy", 200), heldout_tasks("smol-easy", 200)
    assert first == again
    assert len({t.seed for t in first}) == 200
    assert {t.dataset for t in first} == {e.dataset for e in get_preset("smol-easy").entries}
    training = {
        t.seed
        for r in range(50)
        for peer in range(4)
        for t in derive_tasks(r.to_bytes(32, "big"), f"0x{peer + 1:040x}", get_preset("smol-easy"))
    }
    assert not training & {t.seed for t in first}
    assert heldout_seed("smol-easy", 0) != heldout_seed("paper", 0)


def test_evaluation_scores_each_adapters_greedy_answers(tokenizer) -> None:  # type: ignore[no-untyped-def]
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    pool = AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tokenizer))
    for i, name in enumerate(("alpha", "beta")):
        pool.add(name, LoraSettings(rank=4, alpha=8), seed=i)
        with torch.no_grad():
            for key, param in pool.adapter_parameters(name).items():
                if "lora_B" in key:
                    param.normal_(0, 1.0)
    tasks = heldout_tasks("smol-easy", 8)
    results = evaluate(pool, ["alpha", "beta"], tasks, max_new_tokens=5)
    prompts = encode_prompts(tokenizer, [build_messages(t) for t in tasks])
    greedy = SamplingConfig(max_new_tokens=5, temperature=0.0)
    for name, result in zip(("alpha", "beta"), results, strict=True):
        with pool.activate(name) as policy:
            answers = generate_from_ids(
                policy, tokenizer, prompts, num_completions=1, sampling=greedy
            )
        # the strict format: stopped, one <answer>...</answer>, nothing after it
        formatted = sum(strict_answer(a[0].text, a[0].finish_reason) is not None for a in answers)
        assert result.tasks == 8 and result.format_rate == formatted / 8
        assert 0.0 <= result.accuracy <= result.format_rate
