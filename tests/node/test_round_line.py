"""The round line ``swarm run`` prints says what its reward figure is: a mean per completion of the
node's own batch, where the leaderboard shows sums (docs/API.md, "Rewards")."""

from __future__ import annotations

from node.round.report import RoundReport


def test_the_round_line_calls_its_reward_a_mean_per_completion() -> None:
    report = RoundReport(round=7, peer="0x" + "ab" * 20, published="yes", local_reward=0.0625)
    line = report.line()
    assert line.startswith("round 7: published yes, mean reward per completion 0.062, ")
    assert "local reward" not in line


def test_a_round_without_its_own_batch_prints_no_raw_none() -> None:
    line = RoundReport(round=8, peer="0x" + "cd" * 20).line()
    assert "mean reward per completion -," in line
    assert "None" not in line
