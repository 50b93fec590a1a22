"""encode_prompts and stop_token_ids: chat template, the plain fallback, bad conversations."""

from __future__ import annotations

import copy

import pytest

from node.policy.model import encode_prompts, stop_token_ids

CHAT = [{"role": "user", "content": "What is 2+3?"}]


def test_chat_template_ends_with_the_assistant_header(tokenizer) -> None:
    [ids] = encode_prompts(tokenizer, [CHAT])
    text = tokenizer.decode(ids)
    assert text.endswith("<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n")
    assert text.startswith("<|im_start|>system\n")  # SmolLM2's template adds a default system turn
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3  # not doubled


def test_several_conversations_keep_their_order(tokenizer) -> None:
    other = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    first, second = encode_prompts(tokenizer, [CHAT, other])
    assert first == encode_prompts(tokenizer, [CHAT])[0]
    assert "Be brief." in tokenizer.decode(second)
    assert encode_prompts(tokenizer, []) == []


def test_a_tokenizer_without_chat_template_gets_role_lines(tokenizer) -> None:
    plain = copy.deepcopy(tokenizer)
    plain.chat_template = None
    messages = [{"role": "system", "content": "Be brief."}, *CHAT]
    [ids] = encode_prompts(plain, messages_list=[messages])
    assert plain.decode(ids) == "system: Be brief.\nuser: What is 2+3?\nassistant:"


@pytest.mark.parametrize(
    "bad",
    [
        [],  # no messages
        "What is 2+3?",  # a bare string, not a conversation
        [{"role": "user"}],  # no content
        [{"role": "user", "content": 5}],  # content not text
        ["What is 2+3?"],  # a message that is not a mapping
    ],
)
def test_malformed_conversations_are_refused(tokenizer, bad) -> None:
    with pytest.raises(ValueError, match="prompt 1"):
        encode_prompts(tokenizer, [CHAT, bad])


def test_stop_tokens_include_the_end_of_turn(tiny_base, tokenizer) -> None:
    stops = stop_token_ids(tokenizer, tiny_base.model)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in stops
    assert tokenizer.eos_token_id in stops
    assert stops == sorted(set(stops))
