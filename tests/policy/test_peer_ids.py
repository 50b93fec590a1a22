"""A batch's completions as a receiver trains on them (node.policy.peer_ids): the sampled ids
where the batch's tokenizer is the receiver's and the ids agree with the text, else the text and
its finish reason. Batches here are built by the real producer path (``assemble_batch``)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from transformers import PreTrainedTokenizerBase  # noqa: E402

from node.learning_data import GeneratedCompletion, TextCompletion  # noqa: E402
from node.policy.generation import SamplingConfig, generate_from_ids  # noqa: E402
from node.policy.model import encode_prompts, end_of_turn_id  # noqa: E402
from node.policy.peer_ids import PeerIds, tokenizer_digest  # noqa: E402
from node.rollouts import Completion  # noqa: E402
from node.rollouts.assemble import batch_completion  # noqa: E402
from tests.rollouts.factories import model_info  # noqa: E402
from node.tasks import DEFAULT_PRESET_NAME, TaskItem, derive_tasks, get_preset  # noqa: E402
from tests.docs.protocol_vectors import PROTOCOL_PATH, read_vectors  # noqa: E402
from tests.policy.test_trained_ids import word_level_tokenizer  # noqa: E402

PROMPT = [{"role": "user", "content": "What is 2 + 2?"}]


def completion(
    text: str, finish_reason: str, token_ids: list[int], logprobs: list[float] | None = None
) -> Completion:
    """A batch's completion (log-probs 0 unless given)."""
    return Completion(
        text=text,
        reward=0.0,
        finish_reason=finish_reason,  # type: ignore[arg-type]
        token_ids=token_ids,
        logprobs=[0.0] * len(token_ids) if logprobs is None else logprobs,
    )


@pytest.fixture(scope="module")
def chatty(tiny_base):  # type: ignore[no-untyped-def]
    """The tiny model with a random output layer whose end-of-turn row copies the row of the
    prompt's likeliest first token: it stops early about as often as it goes on."""
    model, tokenizer = copy.deepcopy(tiny_base.model), tiny_base.tokenizer
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        head = torch.randn_like(model.lm_head.weight)  # (V, H)
    model.lm_head.weight = torch.nn.Parameter(head, requires_grad=False)
    prompt = torch.tensor([encode_prompts(tokenizer, [PROMPT])[0]])
    with torch.no_grad():
        first = int(model(input_ids=prompt).logits[0, -1].argmax())
        head[end_of_turn_id(tokenizer)] = head[first]
    return model


@pytest.fixture(scope="module")
def arithmetic_task() -> TaskItem:
    return derive_tasks(b"\x01" * 32, "0x" + "11" * 20, get_preset(DEFAULT_PRESET_NAME))[0]


@pytest.fixture(scope="module")
def peer_ids(tokenizer: PreTrainedTokenizerBase) -> PeerIds:
    return PeerIds(tokenizer)


def test_the_digest_names_the_tokenizer(tokenizer: PreTrainedTokenizerBase) -> None:
    digest = tokenizer_digest(tokenizer)
    assert digest.startswith("0x") and len(digest) == 66
    assert tokenizer_digest(copy.deepcopy(tokenizer)) == digest  # equal, another object
    assert tokenizer_digest(word_level_tokenizer()) != digest
    model_info(digest)  # the batch's form


def test_published_samples_come_back_as_sampled(
    chatty, tokenizer: PreTrainedTokenizerBase, peer_ids: PeerIds, arithmetic_task: TaskItem
) -> None:
    """Own samples, through the batch's fields, are the same ids, reason and log-probs."""
    prompt = encode_prompts(tokenizer, [PROMPT])[0]
    sampling = SamplingConfig(max_new_tokens=6)
    (samples,) = generate_from_ids(
        chatty, tokenizer, [prompt], num_completions=6, sampling=sampling, seed=2
    )
    published = [batch_completion(arithmetic_task, s) for s in samples]
    trained = peer_ids.trained(published, peer_ids.digest)
    assert {s.finish_reason for s in samples} == {"stop", "length"}, "both kinds are exercised"
    for sample, got in zip(samples, trained, strict=True):
        assert isinstance(got, GeneratedCompletion)
        assert (got.text, got.token_ids, got.finish_reason) == (
            sample.text,
            sample.token_ids,
            sample.finish_reason,
        )
        assert got.logprobs == pytest.approx(sample.logprobs, abs=1e-6)


def test_another_tokenizer_gets_text_and_finish_reason(peer_ids: PeerIds) -> None:
    stopped = completion("<answer>4</answer>", "stop", [27, 28, 2])
    trained = peer_ids.trained([stopped], tokenizer_digest(word_level_tokenizer()))
    assert trained == [TextCompletion("<answer>4</answer>", "stop")]
    assert peer_ids.trained([stopped], None) == [TextCompletion("<answer>4</answer>", "stop")]


def ids_of(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_ids_that_disagree_with_the_batch_fall_back_to_the_text(
    tokenizer: PreTrainedTokenizerBase, peer_ids: PeerIds
) -> None:
    """The rewards were verified on the text: ids that say anything else are not trained on."""
    text = "<answer>4</answer>"
    words, eot = ids_of(tokenizer, text), end_of_turn_id(tokenizer)
    junk = ids_of(tokenizer, "<answer>5</answer> and more")
    lying = {
        "other text": completion(text, "stop", junk + [eot]),
        "stop without a stop token": completion(text, "stop", words + words[-1:]),
        "stop token inside": completion(text + "x", "stop", words + [eot] + ids_of(tokenizer, "x") + [eot]),
        "cut, yet a stop token": completion(text, "length", words[:-1] + [eot]),
        "id outside the vocabulary": completion(text, "length", words[:-1] + [len(tokenizer) + 5]),
    }
    for case, given in lying.items():
        (trained,) = peer_ids.trained([given], peer_ids.digest)
        assert trained == TextCompletion(given.text, given.finish_reason), case


def test_a_non_canonical_split_is_trained_as_sampled(
    tokenizer: PreTrainedTokenizerBase, peer_ids: PeerIds
) -> None:
    """" answer" sampled as two pieces decodes to the same text as the one-token form: the
    receiver keeps the pieces (re-tokenising would train on a sequence nobody sampled)."""
    vocab = tokenizer.get_vocab()
    split = [vocab["Ġans"], vocab["wer"]]
    (trained,) = peer_ids.trained([completion(" answer", "length", split, [-1.0, -2.0])], peer_ids.digest)
    assert trained == GeneratedCompletion(" answer", tuple(split), "length", (-1.0, -2.0))


def test_the_protocol_vectors_batch_holds_the_shipped_tokenizers_ids(
    tokenizer: PreTrainedTokenizerBase, peer_ids: PeerIds
) -> None:
    """docs/PROTOCOL.md's inputs name the shipped tokenizer's digest, and their ids are that
    tokenizer's sampling of their texts: a receiver trains on them as sampled."""
    spec = read_vectors(PROTOCOL_PATH.read_text(encoding="utf-8"))["inputs"]["batch"]
    assert spec["tokenizer"] == peer_ids.digest
    (group,) = spec["completions"]
    with_ids = [completion(**c) for c in group if c["token_ids"] is not None]
    assert len(with_ids) == len(group) == 4  # a verifier flags a completion without ids
    trained = peer_ids.trained(with_ids, spec["tokenizer"])
    assert all(isinstance(t, GeneratedCompletion) for t in trained)
