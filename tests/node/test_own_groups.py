"""A node's own groups from generation to training: sampled ids when fresh, and after a restart
the ids its batch published.

What the GRPO step then makes of each form is tested in tests/policy/test_trained_ids.py.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from transformers import PreTrainedTokenizerBase  # noqa: E402

from node.learning_data import (  # noqa: E402
    GeneratedCompletion,
    GeneratedGroup,
    ScoredGroup,
    TextCompletion,
)
from node.policy.adapters import AdapterPool  # noqa: E402
from node.policy.generation import SamplingConfig  # noqa: E402
from node.policy.grpo import GRPOConfig  # noqa: E402
from node.policy.model import BaseModel, encode_prompts, tiny_model  # noqa: E402
from node.provenance.seeds import local_seeds  # noqa: E402
from node.round.learner import Learner, LearnerSettings  # noqa: E402
from node.round.own import OwnRound, pick_local  # noqa: E402
from node.tasks import (  # noqa: E402
    DEFAULT_PRESET_NAME,
    TaskItem,
    build_messages,
    derive_tasks,
    get_preset,
)
from node.rollouts import SignedBatch, decode_batch  # noqa: E402
from node.rollouts.assemble import assemble_batch  # noqa: E402
from tests.rollouts.factories import model_info  # noqa: E402
from tests.rollouts.factories import DOMAIN, PEER  # noqa: E402

GROUP_SIZE = 4


def tasks(count: int) -> list[TaskItem]:
    return derive_tasks(b"\x07" * 32, PEER.address, get_preset(DEFAULT_PRESET_NAME))[:count]


@pytest.fixture
def learner(tokenizer: PreTrainedTokenizerBase) -> Learner:
    model = tiny_model(tokenizer, seed=0).eval().requires_grad_(False)
    pool = AdapterPool(BaseModel(name="tiny", model=model, tokenizer=tokenizer))
    settings = LearnerSettings(
        sampling=SamplingConfig(max_new_tokens=6), grpo=GRPOConfig(max_completion_tokens=6)
    )
    return Learner(pool, "node", tokenizer, settings)


def test_fresh_own_groups_are_trained_on_as_sampled(
    learner: Learner, tokenizer: PreTrainedTokenizerBase
) -> None:
    round_tasks = tasks(2)
    generated = learner.generate(round_tasks, GROUP_SIZE, seeds=local_seeds(1, 2, GROUP_SIZE))
    prompts = encode_prompts(tokenizer, [build_messages(t) for t in round_tasks])
    assert [list(g.prompt_ids) for g in generated] == prompts
    samples = [c for g in generated for c in g.completions]
    assert all(len(c.token_ids) == 6 or c.finish_reason == "stop" for c in samples)
    rewards = [[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]]  # the second: no learning signal

    own = OwnRound.from_generated(round_tasks, generated, rewards)
    picked = pick_local(own, 2, random.Random(0))

    assert picked == [ScoredGroup(prompts[0], list(generated[0].completions), rewards[0])]
    assert all(isinstance(c, GeneratedCompletion) for c in picked[0].completions)
    assert own.texts == tuple(g.texts for g in generated)
    metrics = learner.train(picked)
    assert not metrics.skipped and metrics.num_sequences == GROUP_SIZE


def publish(learner: Learner, round_tasks: list[TaskItem], *, own_tokenizer: bool) -> SignedBatch:
    """The node's batch of fresh samples, through the producer's path, as the store returns it
    (naming the learner's tokenizer, or another one)."""
    generated = learner.generate(
        round_tasks, GROUP_SIZE, seeds=local_seeds(3, len(round_tasks), GROUP_SIZE)
    )
    encoded = assemble_batch(
        account=PEER,
        domain=DOMAIN,
        round=7,
        preset=DEFAULT_PRESET_NAME,
        model=model_info(learner.peer_ids.digest if own_tokenizer else "0x" + "cd" * 32),
        tasks=round_tasks,
        samples=[g.completions for g in generated],
    )
    return decode_batch(encoded.data)


def test_own_groups_reloaded_from_the_store_are_trained_on_as_sampled(learner: Learner) -> None:
    round_tasks = tasks(2)
    batch = publish(learner, round_tasks, own_tokenizer=True)

    own = OwnRound.from_batch(batch, round_tasks, trained=learner.peer_ids.trained)
    groups = own.scored_groups()

    assert own.generated is None
    for group, task, stored in zip(groups, round_tasks, batch.body.groups, strict=True):
        assert group.prompt == build_messages(task)
        assert [(c.text, list(c.token_ids), c.finish_reason) for c in group.completions] == [
            (c.text, c.token_ids, c.finish_reason) for c in stored.completions
        ]
        assert list(group.rewards) == [c.reward for c in stored.completions]


def test_own_groups_reloaded_under_another_tokenizer_are_texts_with_their_finish_reasons(
    learner: Learner,
) -> None:
    round_tasks = tasks(2)
    batch = publish(learner, round_tasks, own_tokenizer=False)

    own = OwnRound.from_batch(batch, round_tasks, trained=learner.peer_ids.trained)

    for group, stored in zip(own.scored_groups(), batch.body.groups, strict=True):
        assert group.completions == [
            TextCompletion(c.text, c.finish_reason) for c in stored.completions
        ]


def test_an_own_round_has_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="either generated or reloaded"):
        OwnRound(tasks=tuple(tasks(1)), texts=(("five",),), rewards=((1.0,),))


def test_an_own_round_refuses_samples_that_are_not_its_texts() -> None:
    sample = GeneratedCompletion("four", (5, 6), "length")
    with pytest.raises(ValueError, match="not the batch's texts"):
        OwnRound(
            tasks=tuple(tasks(1)),
            texts=(("five",),),
            rewards=((1.0,),),
            generated=(GeneratedGroup((1, 2), (sample,)),),
        )
