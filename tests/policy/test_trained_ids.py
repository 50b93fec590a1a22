"""Which token ids a GRPO step trains on (node.policy.grpo's docstring, "What is trained on").

- this node's own samples: the prompt ids fed to generation, then exactly the ids sampled; the
  stop token is there iff the sample stopped; nothing is decoded and re-tokenised;
- a text (a peer's, or own reloaded after a restart): tokenised once with the node's tokenizer,
  then the end-of-turn token (cut at ``max_completion_tokens`` with none);
- heterogeneous models: a text sampled by a model with another tokenizer is trained on with the
  node's. Only the shipped SmolLM2 tokenizer is available offline, so the other one is built here:
  a word-level ``tokenizers`` tokenizer with a ChatML-like chat template, under its own tiny model.

"What the step trains on" is read where it cannot be faked: the token ids and attention mask
entering the model's decoder during ``GRPOTrainer.step``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from peft import PeftModel  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast  # noqa: E402

from node.learning_data import (  # noqa: E402
    GeneratedCompletion,
    GeneratedGroup,
    ScoredGroup,
    TextCompletion,
)
from node.policy.adapters import AdapterPool, LoraSettings, OptimizerSettings  # noqa: E402
from node.policy.errors import ModelLoadError  # noqa: E402
from node.policy.generation import SamplingConfig, generate_from_ids, generate_groups  # noqa: E402
from node.policy.grpo import (  # noqa: E402
    GRPOConfig,
    GRPOTrainer,
    group_advantages,
    prompt_token_ids,
    tokenize_groups,
    trainable_parameters,
)
from node.policy.model import BaseModel, encode_prompts, end_of_turn_id, tiny_model  # noqa: E402

PROMPTS = [
    [{"role": "user", "content": "What is 2 + 2?"}],
    [{"role": "user", "content": "Name a colour."}],
]
REWARDS = [1.0, 0.0, 0.0, 1.0]
MAX_TOKENS = 8
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WORDS = ["the", "answer", "is", "what", "plus", "colour", "red", "<", ">", "/", "?", "+", "."]


def word_level_tokenizer() -> PreTrainedTokenizerBase:
    """A second, unrelated tokenizer: whole words of a tiny vocabulary, ChatML-like turns."""
    special = ["[UNK]", "<pad>", "<|im_start|>", "<|im_end|>", "user", "assistant", "system"]
    vocab = {w: i for i, w in enumerate([*special, *WORDS, *map(str, range(10))])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        pad_token="<pad>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def make_pool(tokenizer: PreTrainedTokenizerBase, name: str) -> AdapterPool:
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    pool = AdapterPool(BaseModel(name=name, model=model, tokenizer=tokenizer))
    pool.add("node", LoraSettings(rank=8, alpha=16), OptimizerSettings(lr=1e-3), seed=1)
    return pool


@pytest.fixture
def policy(tokenizer: PreTrainedTokenizerBase) -> Iterator[PeftModel]:
    """A tiny Llama over the shipped tokenizer, with one node's LoRA adapter active."""
    with make_pool(tokenizer, "tiny").activate("node") as model:
        yield model


def trained_rows(
    policy: PeftModel, tokenizer: PreTrainedTokenizerBase, groups: Sequence[ScoredGroup]
) -> list[list[int]]:
    """One GRPO step on ``groups``; the sequences (padding dropped) its forward passes fed the
    model, read from the decoder's inputs. The step runs every sequence in full
    (``share_prompts=False``) so that each decoder row is one whole sequence; that the shared-prompt
    pass computes the same log-probs and gradients is tested in test_together.py."""
    seen: list[list[int]] = []

    def record(_module: object, _args: tuple, kwargs: dict) -> None:
        for ids, mask in zip(kwargs["input_ids"].tolist(), kwargs["attention_mask"].tolist()):
            seen.append([i for i, m in zip(ids, mask) if m])

    hook = policy.get_decoder().register_forward_pre_hook(record, with_kwargs=True)
    try:
        config = GRPOConfig(max_completion_tokens=MAX_TOKENS, share_prompts=False)
        optimizer = torch.optim.SGD(trainable_parameters(policy), lr=1e-3)
        metrics = GRPOTrainer(policy, tokenizer, config, optimizer).step(groups)
    finally:
        hook.remove()
    assert not metrics.skipped
    return seen


def round_trip(sample: GeneratedCompletion, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """What the old text path trained on: the decoded text re-encoded, then the end-of-turn."""
    ids = tokenizer(sample.text, add_special_tokens=False)["input_ids"]
    return ids + [end_of_turn_id(tokenizer)]


def completion_ids(
    groups: Sequence[ScoredGroup], tokenizer: PreTrainedTokenizerBase, max_tokens: int
) -> list[list[int]]:
    """The completion part of every tokenized sequence, with its prompt length checked."""
    advantages = [group_advantages(torch.tensor(g.rewards)) for g in groups]
    sequences = tokenize_groups(groups, advantages, tokenizer, max_tokens)
    prompts = [len(prompt_token_ids(g.prompt, tokenizer)) for g in groups for _ in g.completions]
    assert [s.prompt_length for s in sequences] == prompts
    return [s.input_ids[s.prompt_length :] for s in sequences]


# ---------------------------------------------------------------- own samples


def test_own_samples_are_trained_on_as_sampled_not_decoded_and_re_encoded(
    policy: PeftModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    sampling = SamplingConfig(max_new_tokens=MAX_TOKENS)
    generated = generate_groups(
        policy, tokenizer, PROMPTS, num_completions=len(REWARDS), sampling=sampling, seed=5
    )
    samples = [c for g in generated for c in g.completions]
    # the round trip is not harmless: for some of these samples it yields other ids
    assert any(round_trip(c, tokenizer)[:-1] != list(c.token_ids) for c in samples)
    assert [list(g.prompt_ids) for g in generated] == encode_prompts(tokenizer, PROMPTS)

    rows = trained_rows(policy, tokenizer, [ScoredGroup.generated(g, REWARDS) for g in generated])

    expected = [list(g.prompt_ids) + list(c.token_ids) for g in generated for c in g.completions]
    assert rows == expected


def test_the_stop_token_is_trained_on_iff_the_sample_stopped(
    policy: PeftModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    # The random tiny model almost never samples a real stop token in 8 steps. With one token in
    # 12 a stop id (~8% a step), about half the samples stop and half run to max_new_tokens.
    stops = set(range(0, len(tokenizer), 12))
    prompt_ids = encode_prompts(tokenizer, PROMPTS)
    completions = generate_from_ids(
        policy,
        tokenizer,
        prompt_ids,
        num_completions=len(REWARDS),
        sampling=SamplingConfig(max_new_tokens=MAX_TOKENS),
        seed=11,
        stop_ids=sorted(stops),
    )
    groups = [
        ScoredGroup.generated(GeneratedGroup(tuple(p), tuple(c)), REWARDS)
        for p, c in zip(prompt_ids, completions, strict=True)
    ]
    samples = [c for g in groups for c in g.completions]
    assert {c.finish_reason for c in samples} == {"stop", "length"}

    trained = completion_ids(groups, tokenizer, MAX_TOKENS)

    for sample, ids in zip(samples, trained, strict=True):
        assert ids == list(sample.token_ids)
        if sample.finish_reason == "stop":  # ends with the stop token sampled, not in the text
            assert ids[-1] in stops and all(i not in stops for i in ids[:-1])
            assert sample.text == tokenizer.decode(ids[:-1], clean_up_tokenization_spaces=False)
        else:  # cut: nothing appended
            assert len(ids) == MAX_TOKENS and all(i not in stops for i in ids)


def test_a_non_canonical_sample_keeps_its_ids(tokenizer: PreTrainedTokenizerBase) -> None:
    vocab = tokenizer.get_vocab()
    split = [vocab["Ġans"], vocab["wer"]]  # " answer" in two pieces; its own token is "Ġanswer"
    eot = end_of_turn_id(tokenizer)
    text = tokenizer.decode(split, clean_up_tokenization_spaces=False)
    assert text == " answer" and tokenizer(text, add_special_tokens=False)["input_ids"] == [
        vocab["Ġanswer"]
    ]
    stopped = GeneratedCompletion(text, (*split, eot), "stop")
    cut = GeneratedCompletion(text, tuple(split), "length")
    prompt = encode_prompts(tokenizer, PROMPTS[:1])[0]
    groups = [ScoredGroup(prompt, [stopped, cut, TextCompletion(text, "stop")], [1.0, 0.0, 0.5])]

    assert completion_ids(groups, tokenizer, MAX_TOKENS) == [
        [*split, eot],  # as sampled, with its stop token
        split,  # as sampled, nothing appended
        [vocab["Ġanswer"], eot],  # the same text from a peer: tokenised, end-of-turn appended
    ]


def test_an_own_sample_longer_than_max_completion_tokens_is_cut(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    sample = GeneratedCompletion("x", tuple(range(100, 112)), "length")
    groups = [ScoredGroup([1, 2], [sample, TextCompletion("y", "stop")], [1.0, 0.0])]
    assert completion_ids(groups, tokenizer, 5)[0] == [100, 101, 102, 103, 104]


# ---------------------------------------------------------------- peers' texts


def test_peer_texts_are_tokenised_once_with_the_nodes_tokenizer(
    policy: PeftModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    eot, vocab = end_of_turn_id(tokenizer), tokenizer.get_vocab()
    ended = [("<answer>4</answer>", "stop"), ("four", "length"), ("", "stop")]
    texts = [TextCompletion(t, r) for t, r in [*ended, ("many words " * 10, "stop")]]
    own = GeneratedGroup(
        tuple(encode_prompts(tokenizer, PROMPTS[1:])[0]),
        (
            GeneratedCompletion(" red", (vocab["Ġred"], eot), "stop"),
            GeneratedCompletion(" blue", (vocab["Ġblue"],), "length"),
        ),
    )
    groups = [ScoredGroup(PROMPTS[0], texts, REWARDS), ScoredGroup.generated(own, [1.0, 0.0])]

    rows = trained_rows(policy, tokenizer, groups)

    prompt = encode_prompts(tokenizer, PROMPTS[:1])[0]
    words = [tokenizer(t.text, add_special_tokens=False)["input_ids"] for t in texts]
    assert len(words[3]) > MAX_TOKENS
    # stopped: its tokens and end-of-turn; cut ("length"): nothing appended, whatever its length;
    # longer than max_completion_tokens: cut there, losing the end-of-turn
    expected = [prompt + words[0] + [eot], prompt + words[1], prompt + [eot]]
    expected += [prompt + words[3][:MAX_TOKENS]]
    expected += [list(own.prompt_ids) + list(c.token_ids) for c in own.completions]
    assert rows == expected


# ---------------------------------------------------------------- heterogeneous models


@pytest.mark.parametrize("direction", ["word-level to SmolLM2", "SmolLM2 to word-level"])
def test_text_from_a_model_with_another_tokenizer_is_trained_on(
    tokenizer: PreTrainedTokenizerBase, direction: str
) -> None:
    words = word_level_tokenizer()
    sender, receiver = (words, tokenizer) if direction.startswith("word") else (tokenizer, words)
    with make_pool(sender, "sender").activate("node") as model:
        sampling = SamplingConfig(max_new_tokens=6)
        (group,) = generate_groups(
            model, sender, PROMPTS[:1], num_completions=4, sampling=sampling, seed=3
        )
    texts = [TextCompletion(c.text, c.finish_reason) for c in group.completions]
    assert any(t.text for t in texts), texts

    pool = make_pool(receiver, "receiver")
    with pool.activate("node") as policy:
        before = [p.detach().clone() for p in trainable_parameters(policy)]
        rows = trained_rows(policy, receiver, [ScoredGroup(PROMPTS[0], texts, REWARDS)])
        after = trainable_parameters(policy)

    prompt = encode_prompts(receiver, PROMPTS[:1])[0]
    eot = end_of_turn_id(receiver)
    encoded = [receiver(t.text, add_special_tokens=False)["input_ids"] for t in texts]
    ended = [ids + [eot] if t.finish_reason == "stop" else ids for t, ids in zip(texts, encoded)]
    expected = [prompt + ids[:MAX_TOKENS] for ids in ended]
    assert rows == expected
    assert [list(c.token_ids) for c in group.completions] != [r[len(prompt) :] for r in expected]
    assert any(not torch.equal(b, a) for b, a in zip(before, after, strict=True))


def _special_only_tokenizer(eos: str | None, *extra: str) -> PreTrainedTokenizerBase:
    vocab = {w: i for i, w in enumerate(["[UNK]", "<pad>", "the", *extra])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="<pad>", eos_token=eos
    )


def test_the_end_of_turn_token_is_the_chat_formats_not_eos_and_never_unk() -> None:
    llama3_like = _special_only_tokenizer("<|end_of_text|>", "<|end_of_text|>", "<|eot_id|>")
    assert end_of_turn_id(llama3_like) == llama3_like.convert_tokens_to_ids("<|eot_id|>") == 4
    plain = _special_only_tokenizer("</s>", "</s>")  # no end-of-turn token: EOS, not [UNK]
    assert end_of_turn_id(plain) == plain.eos_token_id == 3
    with pytest.raises(ModelLoadError, match="no EOS"):
        end_of_turn_id(_special_only_tokenizer(None))
