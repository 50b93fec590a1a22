"""The ``swarm.rollouts/3`` batch document as strict, frozen pydantic models.

Strict: no coercion (a string is never read as a number, a bool never as an int, a list never as
an object), unknown fields are refused, every string has a length limit (node.rollouts.limits)
and must be valid Unicode (pydantic refuses lone surrogates, which have no UTF-8 encoding). Addresses must be
EIP-55 checksummed; hashes and signatures lower-case hex. A zero reward is normalised to ``0.0``
so ``-0.0`` never reaches the canonical encoding.

    SignedBatch{body: BatchBody, signature}
    BatchBody{schema, chain_id, coordinator, round, peer, model: ModelInfo, tasks: TaskSource,
              groups: [Group{task: TaskRecord, completions: [Completion]}]}
    ModelInfo{name, base, adapter, lora: LoraShape{rank, alpha, targets}, sampler, tokenizer}
    Completion{text, reward, finish_reason, token_ids, logprobs}

What ``swarm.rollouts/3`` adds to ``/2``: the batch commits to the model that sampled it (the
base model's weights digest, the store address of the adapter, its LoRA shape and the sampler's
id) and every completion carries the ids it was sampled as and their log-probs, so that a
verifier can recompute the samples (docs/PROTOCOL.md, "Seeded sampler").

A violated group-size rule is reported with the pydantic error type ``group_size`` so the codec
can give it its own reject reason.
"""

from __future__ import annotations

from typing import Annotated, Literal

from eth_utils import is_checksum_address
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from node.rollouts import limits


def _checksummed(value: str) -> str:
    if not is_checksum_address(value):
        raise PydanticCustomError(
            "checksum_address", "not an EIP-55 checksummed address: {value}", {"value": value[:64]}
        )
    return value


def _plain_zero(value: float) -> float:
    return value + 0.0 if value == 0.0 else value  # -0.0 + 0.0 == +0.0


Address = Annotated[StrictStr, Field(max_length=42), AfterValidator(_checksummed)]
Hash32Hex = Annotated[StrictStr, Field(pattern=r"^0x[0-9a-f]{64}$")]
SignatureHex = Annotated[StrictStr, Field(pattern=r"^0x[0-9a-f]{130}$")]
Uint64 = Annotated[StrictInt, Field(ge=0, le=limits.MAX_UINT64)]
Reward = Annotated[
    StrictFloat, Field(ge=0.0, le=1.0, allow_inf_nan=False), AfterValidator(_plain_zero)
]

CompletionText = Annotated[StrictStr, Field(max_length=limits.MAX_COMPLETION_CHARS)]
DatasetName = Annotated[StrictStr, Field(min_length=1, max_length=limits.MAX_DATASET_CHARS)]
QuestionText = Annotated[StrictStr, Field(min_length=1, max_length=limits.MAX_QUESTION_CHARS)]
AnswerText = Annotated[StrictStr, Field(max_length=limits.MAX_ANSWER_CHARS)]
ModelName = Annotated[StrictStr, Field(min_length=1, max_length=limits.MAX_MODEL_NAME_CHARS)]
PresetName = Annotated[StrictStr, Field(min_length=1, max_length=limits.MAX_PRESET_CHARS)]
GeneratorName = Annotated[StrictStr, Field(min_length=1, max_length=limits.MAX_GENERATOR_CHARS)]


class _Strict(BaseModel):
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
    )


TokenId = Annotated[StrictInt, Field(ge=0, le=limits.MAX_TOKEN_ID)]
LogProb = Annotated[
    StrictFloat, Field(le=0.0, allow_inf_nan=False), AfterValidator(_plain_zero)
]
TokenIds = Annotated[list[TokenId], Field(min_length=1, max_length=limits.MAX_COMPLETION_TOKENS)]
ModuleName = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_]{1,64}$")]
LogProbs = Annotated[list[LogProb], Field(min_length=1, max_length=limits.MAX_COMPLETION_TOKENS)]


class Completion(_Strict):
    """One sampled completion, why it ended, the reward its publisher scored it with, the token
    ids it was sampled as (ending with the stop token when it stopped) and the sampler's log-prob
    of each."""

    text: CompletionText
    reward: Reward
    finish_reason: Literal["stop", "length"]
    token_ids: TokenIds
    logprobs: LogProbs

    @model_validator(mode="after")
    def _logprobs_match_ids(self) -> Completion:
        if len(self.logprobs) != len(self.token_ids):
            raise PydanticCustomError("logprobs", "one log-prob per token id", {})
        return self


class TaskRecord(_Strict):
    """The task a group answers: dataset, position in the publisher's task list, Q and A."""

    dataset: DatasetName
    index: Annotated[StrictInt, Field(ge=0, le=limits.MAX_TASK_INDEX)]
    question: QuestionText
    answer: AnswerText | None


class Group(_Strict):
    """One task and the G completions sampled for it."""

    task: TaskRecord
    completions: list[Completion] = Field(min_length=1, max_length=limits.MAX_COMPLETIONS_PER_GROUP)


def _sorted_unique(names: list[str]) -> list[str]:
    if names != sorted(set(names)):
        raise PydanticCustomError("targets", "LoRA targets must be sorted and distinct", {})
    return names


class LoraShape(_Strict):
    """The adapter's LoRA shape: rank, alpha and the module names it is applied to."""

    rank: Annotated[StrictInt, Field(ge=1, le=limits.MAX_LORA_RANK)]
    alpha: Annotated[StrictInt, Field(ge=1, le=limits.MAX_LORA_ALPHA)]
    targets: Annotated[
        list[ModuleName],
        Field(min_length=1, max_length=limits.MAX_LORA_TARGETS),
        AfterValidator(_sorted_unique),
    ]


class ModelInfo(_Strict):
    """The policy that produced the completions: the base model's name and weights digest, the
    store address of the adapter it sampled with and that adapter's shape, the sampler's id and
    the digest of the tokenizer the token ids belong to."""

    name: ModelName
    base: Hash32Hex
    adapter: Hash32Hex
    lora: LoraShape
    sampler: Annotated[StrictStr, Field(min_length=1, max_length=limits.MAX_SAMPLER_CHARS)]
    tokenizer: Hash32Hex


class TaskSource(_Strict):
    """Where the tasks come from: a preset the verifier must know, and the generator version."""

    preset: PresetName
    generator: GeneratorName


def _same_group_size(groups: list[Group]) -> list[Group]:
    sizes = {len(group.completions) for group in groups}
    if len(sizes) > 1:
        raise PydanticCustomError(
            "group_size",
            "all groups must have the same number of completions, got sizes {sizes}",
            {"sizes": sorted(sizes)},
        )
    return groups


class BatchBody(_Strict):
    """What the peer signs: who, where, when, with which model, and the groups."""

    schema_: Literal["swarm.rollouts/3"] = Field(default=limits.SCHEMA, alias="schema")
    chain_id: Annotated[StrictInt, Field(ge=1, le=limits.MAX_UINT64)]
    coordinator: Address
    round: Uint64
    peer: Address
    model: ModelInfo
    tasks: TaskSource
    groups: Annotated[
        list[Group],
        Field(min_length=1, max_length=limits.MAX_GROUPS),
        AfterValidator(_same_group_size),
    ]

    @property
    def group_size(self) -> int:
        """Completions per group (the same for every group)."""
        return len(self.groups[0].completions)

    @property
    def completion_count(self) -> int:
        """Completions in the whole batch."""
        return sum(len(group.completions) for group in self.groups)

    @property
    def reward_sum_milli(self) -> int:
        """Sum of claimed rewards in on-chain milli-units: each ``round(reward * 1000)``."""
        return sum(
            round(completion.reward * 1000)
            for group in self.groups
            for completion in group.completions
        )


class SignedBatch(_Strict):
    """The stored document: the body and the peer's EIP-712 ``RolloutBatch`` signature."""

    body: BatchBody
    signature: SignatureHex
