"""The strict models: types, limits, addresses, hashes, group sizes, zero rewards."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from node.rollouts import BatchBody, Completion, Group, ModelInfo, SignedBatch, TaskRecord, limits
from tests.rollouts.factories import COORDINATOR, PEER, make_batch, make_body, make_completion

TASK = TaskRecord(dataset="basic_arithmetic", index=0, question="1+1?", answer="2")


def body_fields(**changes: object) -> dict:
    fields = make_body().model_dump(by_alias=True)
    fields.update(changes)
    return fields


def error_types(excinfo: pytest.ExceptionInfo[ValidationError]) -> set[str]:
    return {error["type"] for error in excinfo.value.errors()}


def test_valid_body_properties() -> None:
    body = make_body(groups=3, group_size=5)
    assert body.schema_ == "swarm.rollouts/3"
    assert (body.group_size, body.completion_count) == (5, 15)
    assert body.reward_sum_milli == 3 * (0 + 500 + 1000 + 0 + 500)


def test_models_are_frozen() -> None:
    body = make_body()
    with pytest.raises(ValidationError):
        body.round = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    "changes",
    [
        {"chain_id": "31337"},
        {"chain_id": 0},
        {"chain_id": True},
        {"round": -1},
        {"round": 2**64},
        {"round": 7.0},
        {"peer": PEER.address.lower()},
        {"peer": PEER.address.upper().replace("0X", "0x")},
        {"coordinator": COORDINATOR[:-1]},
        {"coordinator": 5},
        {"schema": "swarm.rollouts/1"},
        {"groups": []},
        {"extra": 1},
        {"model": {"name": "m", "adapter_digest": None, "tokenizer": None}},  # the /2 record
        {"model": None},
        {"model": {**make_body().model.model_dump(), "name": ""}},
        {"model": {**make_body().model.model_dump(), "name": "m" * (limits.MAX_MODEL_NAME_CHARS + 1)}},
        {"tasks": {"preset": "", "generator": "g"}},
        {"tasks": {"preset": "p" * (limits.MAX_PRESET_CHARS + 1), "generator": "g"}},
        {"tasks": {"preset": "p", "generator": "g" * (limits.MAX_GENERATOR_CHARS + 1)}},
    ],
)
def test_body_rejects(changes: dict) -> None:
    with pytest.raises(ValidationError):
        BatchBody.model_validate(body_fields(**changes), strict=True)


def completion(**changes: object) -> dict:
    fields = {
        "text": "x",
        "reward": 0.5,
        "finish_reason": "stop",
        "token_ids": [5, 2],
        "logprobs": [-0.5, -1.0],
    }
    fields.update(changes)
    return {k: v for k, v in fields.items() if v != "omit"}


@pytest.mark.parametrize(
    "fields",
    [
        completion(reward=1.5),
        completion(reward=-0.1),
        completion(reward=float("nan")),
        completion(reward=float("inf")),
        completion(reward="0.5"),
        completion(reward=True),
        completion(reward=None),
        completion(text=5),
        completion(text="x" * (limits.MAX_COMPLETION_CHARS + 1)),
        completion(text="lone \ud800"),
        completion(reward="omit"),
        completion(logprob=-1.0),
        completion(finish_reason="omit"),
        completion(finish_reason=None),
        completion(finish_reason="eos"),
        completion(finish_reason="STOP"),
        completion(token_ids="omit"),
        completion(logprobs="omit"),
        completion(token_ids=[]),
        completion(token_ids=[-1, 2]),
        completion(token_ids=[2**32, 2]),
        completion(token_ids=[1.0, 2]),
        completion(token_ids=[True, 2]),
        completion(
            token_ids=[1] * (limits.MAX_COMPLETION_TOKENS + 1),
            logprobs=[0.0] * (limits.MAX_COMPLETION_TOKENS + 1),
        ),
        completion(logprobs=[-0.5]),  # one per token id
        completion(logprobs=[-0.5, 0.1]),  # a log-prob is at most 0
        completion(logprobs=[-0.5, float("-inf")]),
        completion(logprobs=[-0.5, float("nan")]),
        completion(token_ids=None),  # log-probs without ids
        completion(logprobs=None),  # ids without log-probs
        completion(token_ids=None, logprobs=None),  # since /3 both are required
    ],
)
def test_completion_rejects(fields: dict) -> None:
    with pytest.raises(ValidationError):
        Completion.model_validate(fields, strict=True)


@pytest.mark.parametrize(
    "fields",
    [
        completion(),
        completion(finish_reason="length"),
        completion(token_ids=[limits.MAX_TOKEN_ID, 0]),
    ],
)
def test_completion_accepts(fields: dict) -> None:
    parsed = Completion.model_validate(fields, strict=True)
    assert parsed.model_dump() == fields


def test_completion_limits_count_characters_not_bytes() -> None:
    text = "😀" * limits.MAX_COMPLETION_CHARS  # 4 bytes each in UTF-8
    assert make_completion(text, 0.5).text == text


def test_zero_reward_and_log_prob_are_normalised() -> None:
    parsed = Completion.model_validate(completion(reward=-0.0, logprobs=[-0.0, -1.0]), strict=True)
    assert (str(parsed.reward), str(parsed.logprobs[0])) == ("0.0", "0.0")


def test_int_reward_is_read_as_float() -> None:
    # Accepted by the model; decode_batch still rejects "1" for "1.0" as not canonical.
    assert Completion.model_validate(completion(reward=1), strict=True).reward == 1.0


@pytest.mark.parametrize(
    "task",
    [
        {"dataset": "", "index": 0, "question": "q", "answer": None},
        {
            "dataset": "d" * (limits.MAX_DATASET_CHARS + 1),
            "index": 0,
            "question": "q",
            "answer": None,
        },
        {"dataset": "d", "index": -1, "question": "q", "answer": None},
        {"dataset": "d", "index": 2**32, "question": "q", "answer": None},
        {"dataset": "d", "index": 0, "question": "", "answer": None},
        {
            "dataset": "d",
            "index": 0,
            "question": "q" * (limits.MAX_QUESTION_CHARS + 1),
            "answer": None,
        },
        {
            "dataset": "d",
            "index": 0,
            "question": "q",
            "answer": "a" * (limits.MAX_ANSWER_CHARS + 1),
        },
        {"dataset": "d", "index": 0, "question": "q"},
        {"dataset": "d", "index": "0", "question": "q", "answer": None},
    ],
)
def test_task_rejects(task: dict) -> None:
    with pytest.raises(ValidationError):
        TaskRecord.model_validate(task, strict=True)


def test_group_completion_counts() -> None:
    one = make_completion("", 0.0)
    Group(task=TASK, completions=[one] * limits.MAX_COMPLETIONS_PER_GROUP)
    for count in (0, limits.MAX_COMPLETIONS_PER_GROUP + 1):
        with pytest.raises(ValidationError):
            Group(task=TASK, completions=[one] * count)


def test_group_count_limit() -> None:
    make_body(groups=limits.MAX_GROUPS, group_size=1)
    with pytest.raises(ValidationError):
        make_body(groups=limits.MAX_GROUPS + 1, group_size=1)


def test_groups_must_share_a_size() -> None:
    fields = body_fields()
    fields["groups"][1]["completions"].pop()
    with pytest.raises(ValidationError) as excinfo:
        BatchBody.model_validate(fields, strict=True)
    assert error_types(excinfo) == {"group_size"}


@pytest.mark.parametrize(
    "signature", ["0x" + "ab" * 64, "0x" + "AB" * 65, "ab" * 65 + "00", "0x" + "ab" * 66, 5]
)
def test_signature_form(signature: object) -> None:
    with pytest.raises(ValidationError):
        SignedBatch(body=make_body(), signature=signature)  # type: ignore[arg-type]


def model_fields(**changes: object) -> dict:
    fields = make_body().model.model_dump()
    fields.update(changes)
    return fields


def test_the_model_record_names_base_adapter_shape_sampler_and_tokenizer() -> None:
    info = ModelInfo.model_validate(model_fields(), strict=True)
    assert info.lora.rank == 16 and info.sampler == "swarm.sample/1"


LORA = {"rank": 16, "alpha": 32, "targets": ["q_proj", "v_proj"]}


@pytest.mark.parametrize(
    "changes",
    [
        {"base": None},
        {"adapter": None},
        {"tokenizer": None},
        {"adapter": "0x" + "AB" * 32},
        {"base": "0x" + "ab" * 31},
        {"sampler": ""},
        {"sampler": "s" * (limits.MAX_SAMPLER_CHARS + 1)},
        {"lora": None},
        {"lora": {**LORA, "rank": 0}},
        {"lora": {**LORA, "rank": limits.MAX_LORA_RANK + 1}},
        {"lora": {**LORA, "alpha": 0}},
        {"lora": {**LORA, "alpha": 32.0}},
        {"lora": {**LORA, "targets": []}},
        {"lora": {**LORA, "targets": ["v_proj", "q_proj"]}},  # not sorted
        {"lora": {**LORA, "targets": ["q_proj", "q_proj"]}},  # repeated
        {"lora": {**LORA, "targets": ["q.proj"]}},
        {"lora": {**LORA, "targets": [f"m{i:02d}" for i in range(limits.MAX_LORA_TARGETS + 1)]}},
        {"lora": {**LORA, "dropout": 0.1}},
        {"adapter_digest": None},  # the /2 field
    ],
)
def test_model_record_rejects(changes: dict) -> None:
    with pytest.raises(ValidationError):
        ModelInfo.model_validate(model_fields(**changes), strict=True)
