"""``swarm experiment``: the click command (torch loads inside it, not on import)."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import get_args

import click

from node.config import NO_VALUE, LoraTargets, PeerAdvantage, PeerImportance, is_no_value
from node.experiment.config import ACCOUNTINGS, EXCHANGES, ExperimentConfig, Sharing


def _configs(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]):  # type: ignore[no-untyped-def]
    try:
        return tuple(Sharing.parse(v) for v in value) or None
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


class _GapType(click.ParamType):
    """A positive number of nats, or ``none`` (no peer's group dropped for its gap), which the
    config's ``merged`` turns into None."""

    name = "NATS|none"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        if is_no_value(value):
            return NO_VALUE
        try:
            gap = float(value)
        except ValueError:
            gap = math.nan
        if not gap > 0:
            self.fail(f"{value!r}: a number of nats > 0, or none", param, ctx)
        return gap


@click.command("experiment")
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Run folder: CSV, summary, plots, checkpoints. Run again with it to resume.",
)
@click.option(
    "--config-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="TOML file with the settings below (options given on the command line win).",
)
@click.option("--nodes", type=click.IntRange(2, 10), help="Nodes per configuration [4].")
@click.option("--rounds", type=click.IntRange(min=1), help="Rounds per configuration [20].")
@click.option(
    "--config",
    "configs",
    multiple=True,
    callback=_configs,
    help="An I/J configuration (I local + J external groups per step); repeat. [4/0 2/2 0/4]",
)
@click.option("--seed", "seeds", multiple=True, type=int, help="A seed; repeat for more [0].")
@click.option(
    "--exchange",
    type=click.Choice(EXCHANGES),
    help="chain: Anvil + contract + store (the real protocol) [default]; inprocess: the same "
    "tasks, generation, verification, selection and GRPO step without chain and store.",
)
@click.option("--inprocess", is_flag=True, help="Shorthand for --exchange inprocess.")
@click.option("--model", help="smollm2-135m [default], tiny, or a model folder.")
@click.option("--preset", help="Task preset (dataset mix and scoring rule) [smol-strict].")
@click.option(
    "--tasks",
    "tasks_per_round",
    type=click.IntRange(min=1),
    help="Tasks every node answers per round [4] (not used with --accounting paper).",
)
@click.option(
    "--accounting",
    type=click.Choice(ACCOUNTINGS),
    help="swarm: every node answers --tasks tasks and trains on I of its groups [default]; "
    "paper (the SAPO paper's): an I/J node answers I tasks and takes J groups from peers.",
)
@click.option("--group-size", type=click.IntRange(min=2), help="Completions per task, G [8].")
@click.option("--max-new-tokens", type=click.IntRange(min=1), help="Longest completion [16].")
@click.option("--lr", type=float, help="AdamW learning rate of the LoRA adapters [3e-4].")
@click.option("--lora-rank", type=click.IntRange(min=1), help="LoRA rank [16].")
@click.option(
    "--lora-targets",
    type=click.Choice(get_args(LoraTargets)),
    help="Layers LoRA trains: attention (q, k, v, o projections) or attention+mlp (also gate, "
    "up, down) [attention+mlp].",
)
@click.option(
    "--beta",
    type=click.FloatRange(min=0),
    help="KL penalty weight against the base model [0: none].",
)
@click.option(
    "--peer-weight",
    type=click.FloatRange(0, 1, min_open=True),
    help="Peers' groups' advantages are multiplied by it (own groups': 1) [1.0].",
)
@click.option(
    "--peers-only-steps/--no-peers-only-steps",
    default=None,
    help="Step when every group with a learning signal is a peer's [off].",
)
@click.option(
    "--peer-logprob-gap",
    type=_GapType(),
    help="Drop a peer's group whose mean per-token log-prob under the policy is more than this "
    "many nats below the own completions'; 'none' keeps all [1.0].",
)
@click.option(
    "--peer-importance",
    type=click.Choice(get_args(PeerImportance)),
    help="Peers' token weights w = exp(policy log-prob - sender's; 1 where unknown): none, "
    "truncate (at most the cap) or mask (0 outside [1/cap, cap]) [truncate].",
)
@click.option(
    "--peer-importance-cap",
    type=click.FloatRange(1, min_open=True),
    help="The cap of --peer-importance [2.0].",
)
@click.option(
    "--peer-advantage",
    type=click.Choice(get_args(PeerAdvantage)),
    help="Peers' completions trained on: all, or positive (advantage > 0 only) [all].",
)
@click.option("--window", type=click.IntRange(min=1), help="Moving-average window, rounds [5].")
@click.option("--threads", type=click.IntRange(min=1), help="torch CPU threads [2].")
@click.option(
    "--precision",
    type=click.Choice(["auto", "float32", "bfloat16"]),
    help="GRPO update's matrix products [auto: bf16 autocast where the CPU has native bf16 and "
    "it measures faster than fp32].",
)
@click.option(
    "--batch-nodes/--no-batch-nodes",
    default=None,
    help="Generate and train all nodes of a configuration in shared passes [on].",
)
@click.option(
    "--share-prompts/--no-share-prompts",
    default=None,
    help="Run each group's prompt once in the GRPO update [on].",
)
@click.option(
    "--eval-every",
    type=click.IntRange(min=0),
    help="Evaluate every node on the held-out set every E rounds (and before round 1 and "
    "after the last) [0: never].",
)
@click.option("--eval-tasks", type=click.IntRange(min=1), help="Tasks in the held-out set [200].")
@click.option(
    "--sample-texts",
    type=click.IntRange(min=0),
    help="Own completions per node and round written to samples.csv [2].",
)
@click.option(
    "--same-tasks-as",
    type=click.Path(exists=True, file_okay=False),
    help="In-process only: run on the genesis seeds and first rounds of this chain experiment's "
    "folder, so both exchanges see the same tasks (compare their rounds.csv rows).",
)
def experiment(out: Path, config_file: Path | None, inprocess: bool, **options: object) -> None:
    """Compare I/J sharing configurations (the SAPO experiment) on N nodes over one base model.

    \b
    Every configuration runs the same nodes (keys derived from the seed), the same genesis seed
    and hence the same task streams, from the same initial adapters. Writes rounds.csv (a row
    per node per round, as it goes), samples.csv (a few completions per node per round),
    summary.md/.json and two PNG plots into --out; a progress line per round. Killed? Run the
    same command again: finished rounds are kept (in-process: from the last round's checkpoint;
    chain: an unfinished configuration is redone).
    """
    base = ExperimentConfig.from_toml(config_file) if config_file else ExperimentConfig()
    if inprocess:
        options["exchange"] = "inprocess"
    if not options["seeds"]:
        options["seeds"] = None
    try:
        config = base.merged(**options)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None

    import torch  # torch and transformers load only for this command

    from node.experiment.runner import ConfigMismatch, run_experiment
    from node.policy.model import load_base
    from node.round.loop import StopSignal

    torch.set_num_threads(config.threads)
    logging.getLogger("node.sampling").setLevel(logging.ERROR)
    stop = StopSignal()
    stop.install(lambda message: click.echo(message, err=True))
    click.echo(f"experiment: {config.to_json()}")
    try:
        complete = run_experiment(
            config,
            out,
            load_model=lambda: load_base(config.model),
            echo=click.echo,
            should_stop=lambda: stop.requested,
        )
    except ConfigMismatch as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        raise click.ClickException("aborted; run the same command to resume") from None
    click.echo(f"\n{(out / 'summary.md').read_text() if (out / 'summary.md').exists() else ''}")
    click.echo(
        f"results in {out}"
        if complete
        else f"stopped early; run the same command to resume ({out})"
    )
