"""The shipped SmolLM2-135M-Instruct: load, cache, and generate answers that stop at end of turn.

Slow (~40 s on two cores): the first load dequantises the GGUF file into a temporary cache.
"""

from __future__ import annotations

import pytest
import torch

from node.policy.generation import SamplingConfig, generate
from node.policy.model import SHIPPED_MODEL, SHIPPED_MODEL_NAME, load_base, stop_token_ids

pytestmark = pytest.mark.slow

FEW_SHOT = [
    {"role": "system", "content": "Write only the final answer between <answer> and </answer>."},
    {"role": "user", "content": "Calculate 2 + 2."},
    {"role": "assistant", "content": "<answer>4</answer>"},
    {"role": "user", "content": "Calculate 3 + 5."},
    {"role": "assistant", "content": "<answer>8</answer>"},
    {"role": "user", "content": "Calculate 1 + 6."},
]
SHORT = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    cache = tmp_path_factory.mktemp("swarm-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SWARM_CACHE_DIR", str(cache))
        first = load_base(SHIPPED_MODEL, device="cpu")

        def gguf_read_again() -> None:
            raise AssertionError("the second load dequantised the GGUF file again")

        patch.setattr("node.policy.model.shipped_gguf_dir", gguf_read_again)
        second = load_base(SHIPPED_MODEL, device="cpu")  # from the cache, or the patch raises
    assert (cache / SHIPPED_MODEL / "model.safetensors").is_file()
    return first, second


def test_the_cached_copy_reloads_without_the_gguf_and_equals_the_dequantised_model(
    shipped,
) -> None:
    first, second = shipped
    assert first.name == second.name == SHIPPED_MODEL_NAME
    ours, theirs = first.model.state_dict(), second.model.state_dict()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_few_shot_answers_use_the_tags_and_stop_at_end_of_turn(shipped) -> None:
    base = shipped[0]
    im_end = base.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in stop_token_ids(base.tokenizer, base.model)
    greedy = SamplingConfig(max_new_tokens=32, temperature=0)
    [[answer]] = generate(
        base.model, base.tokenizer, [FEW_SHOT], num_completions=1, sampling=greedy
    )
    assert answer.finish_reason == "stop" and answer.token_ids[-1] == im_end
    assert answer.text.startswith("<answer>") and "<|im_end|>" not in answer.text
    sampled = generate(
        base.model,
        base.tokenizer,
        [FEW_SHOT],
        num_completions=4,
        sampling=SamplingConfig(max_new_tokens=32, temperature=1.0),
        seed=0,
    )
    assert sum(c.finish_reason == "stop" for c in sampled[0]) >= 2


def test_left_padding_keeps_the_greedy_answer(shipped) -> None:
    base = shipped[0]
    greedy = SamplingConfig(max_new_tokens=16, temperature=0)
    alone = generate(base.model, base.tokenizer, [SHORT], num_completions=1, sampling=greedy)
    beside = generate(
        base.model, base.tokenizer, [FEW_SHOT, SHORT], num_completions=1, sampling=greedy
    )
    (one,), (other,) = alone[0], beside[1]
    assert (one.text, one.token_ids, one.finish_reason) == (
        other.text,
        other.token_ids,
        other.finish_reason,
    )
    # the log-probs only within float rounding: the padded batch sums in another order
    assert one.logprobs == pytest.approx(other.logprobs, abs=1e-3)
