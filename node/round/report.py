"""What one round did, for the progress line, the tests and the overhead benchmark."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from node.learning_data import StepKind, StepMetrics

if TYPE_CHECKING:
    from node.round.sample_stats import OwnSample

#: Phases timed in a round. ``generate`` and ``train`` are the learning; ``wait`` is time spent
#: idle for peers; everything else (chain, store, sign, verify, checkpoint) is protocol overhead.
LEARNING_PHASES = ("generate", "train")
IDLE_PHASES = ("wait",)


@dataclass
class Timings:
    """Seconds per phase, accumulated."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def measure(self, phase: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - started)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    @property
    def busy(self) -> float:
        """Wall time not spent waiting for peers."""
        return sum(s for p, s in self.seconds.items() if p not in IDLE_PHASES)

    @property
    def overhead(self) -> float:
        """Busy seconds outside generation and training."""
        return sum(s for p, s in self.seconds.items() if p not in LEARNING_PHASES + IDLE_PHASES)


@dataclass
class RoundReport:
    """One round of one node."""

    round: int
    peer: str
    published: str = "no"  # "yes", "already" (earlier run), "late" (too late), "no"
    #: Mean reward per completion of this node's own batch (not the batch's sum, which is what
    #: the chain and the leaderboard show: the sum over its completions).
    local_reward: float | None = None
    local_groups: int = 0
    external_groups: int = 0
    external_from: Counter[str] = field(default_factory=Counter)  # groups trained on, per peer
    verified_peers: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    committed: int = 0  # verdicts committed this round (on batches of earlier rounds)
    revealed: int = 0  # verdicts revealed this round
    flagged: int = 0  # of them, flags
    settled: int = 0  # flagged batches settled by this node
    #: Peer groups recomputed before training on them, their completions excluded, and the
    #: worst margin seen (None: nothing recomputed), logged so the tolerances can be calibrated.
    provenance_checked: int = 0
    provenance_excluded: int = 0
    worst_margin: float | None = None
    reported: int = 0  # agreements with upheld flags reported
    trained: bool = False
    loss: float | None = None
    #: The GRPO step (``StepMetrics``): the groups it trained on ("own", "mixed", "peers";
    #: "none": no step), the gradient norm before clipping (None: nothing computed), the mean k3
    #: KL against the base (None when beta is 0), the own-minus-peers log-prob gap, the peers'
    #: effective sample size and their groups a weighting rule dropped.
    step_kind: StepKind = "none"
    grad_norm: float | None = None
    kl: float | None = None
    peer_logprob_gap: float | None = None
    peer_ess: float | None = None
    peer_groups_dropped: int = 0
    #: Of this node's own completions of the round (``node.round.sample_stats``): the share cut
    #: at the token limit, the share in the strict answer format (None: no own completions), and
    #: every completion with its reward.
    cut_rate: float | None = None
    format_rate: float | None = None
    samples: tuple[OwnSample, ...] = ()
    timings: Timings = field(default_factory=Timings)

    def record_step(self, metrics: StepMetrics) -> None:
        """What the GRPO step did (its loss, kind, gradient norm, KL, peers' weighting)."""
        self.trained = not metrics.skipped
        self.loss = metrics.loss
        self.step_kind = metrics.kind
        self.grad_norm = metrics.grad_norm if metrics.num_tokens else None
        self.kl = metrics.kl
        self.peer_logprob_gap = metrics.peer_logprob_gap
        self.peer_ess = metrics.peer_ess
        self.peer_groups_dropped = metrics.peer_groups_dropped

    def record_margin(self, margin: float) -> None:
        self.worst_margin = margin if self.worst_margin is None else min(self.worst_margin, margin)

    def line(self) -> str:
        """The progress line ``swarm run`` prints. Its reward is a mean per completion; the
        leaderboard shows sums (a batch's over its completions, a peer's over its batches)."""
        reward = "-" if self.local_reward is None else f"{self.local_reward:.3f}"
        rejected = (
            ", ".join(f"{reason} {n}" for reason, n in sorted(self.rejections.items())) or "none"
        )
        step = self.timings.seconds.get("train")
        trained = f"step {step:.1f}s" if self.trained and step is not None else "no step"
        return (
            f"round {self.round}: published {self.published}, "
            f"mean reward per completion {reward}, "
            f"groups {self.local_groups} local + {self.external_groups} external, "
            f"peers verified {self.verified_peers}, rejected: {rejected}, "
            f"verdicts committed {self.committed}, revealed {self.revealed} "
            f"(flags {self.flagged}), {self._provenance()}{trained}, "
            f"busy {self.timings.busy:.1f}s"
        )

    def _provenance(self) -> str:
        if not self.provenance_checked:
            return ""
        return (
            f"recomputed {self.provenance_checked} peer groups (excluded "
            f"{self.provenance_excluded}, worst margin {self.worst_margin:+.1e}), "
        )
