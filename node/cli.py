"""``swarm``: the volunteer's command line: identity, stake, status, ``run``, ``local up``, ``experiment``.

Every command reads one TOML configuration (``--config``, env ``SWARM_CONFIG``, default
``node.toml``; missing file = all defaults). Secrets never go on the command line: the keystore
password comes from the configured environment variable or password file, or a prompt.
Nothing imports this module; it sits on top of the node.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from eth_account.signers.local import LocalAccount

from node.audit.command import audit as audit_command
from node.chain.client import CoordinatorClient
from node.chain.errors import ChainError
from node.chain.models import TxReceipt
from node.chain.units import format_deadline, format_eth, parse_eth
from node.config import ConfigError, NodeConfig, example_toml, load_config, with_overrides
from node.error_log import save_traceback, unexpected_error_line
from node.experiment.command import experiment as experiment_command
from node.folder_lock import FolderInUse
from node.folder_lock import hold as hold_folder
from node.identity import (
    IdentityError,
    create_keystore,
    keystore_address,
    read_password,
    unlock_keystore,
)
from node.local.anvil import AnvilError
from node.local.kubo import KuboDaemonError, KuboMissing
from node.local.ports import PortTaken
from node.local.swarm import DEFAULT_ANVIL_PORT, DEFAULT_INDEXER_PORT, LocalSwarmSettings
from node.output import Output
from node.policy.errors import PolicyError
from node.round.errors import NodeError
from node.round.exchange import connect_chain
from node.storage import StoreError

DEFAULT_CONFIG = Path("node.toml")


#: The node's own error families: each says what to do, in one line.
USER_ERRORS = (
    AnvilError,
    ChainError,
    ConfigError,
    FolderInUse,
    IdentityError,
    KuboDaemonError,
    KuboMissing,
    NodeError,
    PolicyError,
    PortTaken,
    StoreError,
)


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turns the node's own error families into one-line messages; the traceback goes to the
    error log (``node.error_log``), never to the terminal."""
    try:
        yield
    except USER_ERRORS as exc:
        save_traceback(exc)
        raise click.ClickException(str(exc)) from None


class SwarmGroup(click.Group):
    """The ``swarm`` group: an error no command expected is one line too, with its traceback in
    the error log."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            with _user_errors():
                return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as exc:  # noqa: BLE001 - one line for the user, the traceback in a file
            raise click.ClickException(unexpected_error_line(exc, save_traceback(exc))) from None


def _config(ctx: click.Context) -> NodeConfig:
    path: Path = ctx.obj["config_path"]
    if not path.exists() and not ctx.obj["config_given"]:
        return NodeConfig()
    with _user_errors():
        return load_config(path)


def _password(config: NodeConfig, *, confirm: bool) -> str:
    identity = config.identity
    password_file = identity.password_file.expanduser() if identity.password_file else None
    with _user_errors():
        password = read_password(env=identity.password_env, file=password_file)
    if password is None:
        if not sys.stdin.isatty():
            raise click.ClickException(
                "no keystore password and no terminal to ask for it: set the environment "
                f"variable {identity.password_env}, or [identity] password_file in the config"
            )
        password = click.prompt("Keystore password", hide_input=True, confirmation_prompt=confirm)
    return password


def _account(config: NodeConfig) -> LocalAccount:
    with _user_errors():
        return unlock_keystore(
            config.identity.keystore.expanduser(), _password(config, confirm=False)
        )


def _client(config: NodeConfig, account: LocalAccount | None = None) -> CoordinatorClient:
    with _user_errors():
        return connect_chain(config, account)[0]


def _done(what: str, receipt: TxReceipt) -> None:
    click.echo(
        f"{what} in block {receipt.block_number} (tx {receipt.tx_hash}, "
        f"fee {format_eth(receipt.fee_wei)})"
    )


@click.group(
    cls=SwarmGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="SWARM_CONFIG",
    default=None,
    help=f"Node configuration (TOML) [env SWARM_CONFIG; default ./{DEFAULT_CONFIG}, "
    "all defaults when absent].",
)
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """Run a node of the SAPO swarm testnet: stake an identity, share rollouts, train.

    \b
    Getting started:
      swarm config example > node.toml      # every setting, documented
      swarm init                            # create your encrypted key
      swarm register --name alice --stake 0.05
      swarm status
    """
    _setup_logging()
    ctx.obj = {
        "config_path": config_path or DEFAULT_CONFIG,
        "config_given": config_path is not None,
    }


@main.group()
def config() -> None:
    """Show or check the node configuration."""


@config.command("example")
def config_example() -> None:
    """Print a complete configuration with every default and its description."""
    click.echo(example_toml(), nl=False)


@config.command("check")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def config_check(path: Path) -> None:
    """Validate a configuration file and list every problem."""
    with _user_errors():
        load_config(path)
    click.echo(f"{path} is valid")


@main.command()
@click.option("--force", is_flag=True, help="Replace an existing keystore (its key is lost).")
@click.pass_context
def init(ctx: click.Context, force: bool) -> None:
    """Create this peer's key in an encrypted keystore and print its address.

    The password comes from the configured password file or environment variable
    (SWARM_KEYSTORE_PASSWORD by default), else it is asked twice. The key itself is never printed.
    """
    config = _config(ctx)
    path = config.identity.keystore.expanduser()
    if path.exists() and force:
        click.confirm(f"{path} holds a key (and maybe stake). Replace it?", abort=True)
    with _user_errors():
        address = create_keystore(path, _password(config, confirm=True), overwrite=force)
    click.echo(f"created {path}")
    click.echo(f"address {address}  (fund it, then: swarm register --name NAME --stake AMOUNT)")


@main.command()
@click.option("--name", required=True, help="Display name on the leaderboard (1-32 bytes).")
@click.option("--stake", required=True, help="Stake in ETH (or 'N wei'); at least the minimum.")
@click.pass_context
def register(ctx: click.Context, name: str, stake: str) -> None:
    """Register this peer with a stake."""
    config = _config(ctx)
    try:
        amount = parse_eth(stake)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--stake") from None
    client = _client(config, _account(config))
    with _user_errors():
        _done(f"registered {client.account_address} as {name!r}", client.register(name, amount))


@main.command("add-stake")
@click.option("--amount", required=True, help="ETH to add (or 'N wei').")
@click.pass_context
def add_stake(ctx: click.Context, amount: str) -> None:
    """Add to this peer's stake."""
    config = _config(ctx)
    try:
        wei = parse_eth(amount)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--amount") from None
    client = _client(config, _account(config))
    with _user_errors():
        _done(f"added {format_eth(wei)}", client.add_stake(wei))


@main.command("exit")
@click.pass_context
def exit_(ctx: click.Context) -> None:
    """Stop participating; the stake becomes withdrawable once the last rounds this peer published
    or judged are judged, settled and reported (exit round + 2J + 1), with no open dispute or flag."""
    config = _config(ctx)
    client = _client(config, _account(config))
    with _user_errors():
        receipt = client.request_exit()
        info = client.peer_info(client.account_address or "")
        _done("exit requested", receipt)
        round_ = client.phases().withdrawable_from(info.exit_round)
        start = client.clock.start_of(round_)
        when = format_deadline(start, client.next_block_time())
        click.echo(f"withdrawable from round {round_} ({when})")


@main.command()
@click.pass_context
def withdraw(ctx: click.Context) -> None:
    """Take the stake back once the exit's last rounds are judged (see swarm exit)."""
    config = _config(ctx)
    client = _client(config, _account(config))
    with _user_errors():
        stake = client.peer_info(client.account_address or "").stake
        _done(f"withdrew {format_eth(stake)}", client.withdraw())


@main.command()
@click.pass_context
def claim(ctx: click.Context) -> None:
    """Send this peer its claimable balance: shares of slashes its flags won, settlement tips,
    the bonds of flags against it that lost, and agreement-report shares."""
    config = _config(ctx)
    client = _client(config, _account(config))
    with _user_errors():
        amount = client.claimable(client.account_address or "")
        if amount == 0:
            click.echo("nothing to claim")
            return
        _done(f"claimed {format_eth(amount)}", client.claim())


#: One format for every log line of every command (retries, warnings, -v details).
LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def _setup_logging(verbose: int = 0) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format=LOG_FORMAT, datefmt="%H:%M:%S", force=True)


@main.command()
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    help="Stop after this many rounds [default: round.max_rounds, else until Ctrl-C].",
)
@click.option("-v", "--verbose", count=True, help="-v: each peer's verdict; -vv: debug.")
@click.pass_context
def run(ctx: click.Context, rounds: int | None, verbose: int) -> None:
    """Run this node: each round generate, publish, verify peers, judge, train, checkpoint.

    \b
    Prints one line per round: the mean reward per completion of its own groups, external
    groups used, rejected peer batches by reason, step time; and a line for rounds skipped.
    Ctrl-C stops after the current step with the state and adapter saved; a restarted node
    resumes where it stopped and never publishes a round twice.
    """
    from node.round.exchange import ChainExchange
    from node.round.loop import LoopSettings, StopSignal, run_node

    config = _config(ctx)
    _setup_logging(verbose)
    account = _account(config)
    out = Output()  # output that went away (a closed pipe or terminal) does not stop the node
    stop = StopSignal()
    stop.install(out.error)
    with _user_errors():  # the chain, the registration and the folder before the model loads
        state_lock = hold_folder(config.model.checkpoint_dir.expanduser(), "swarm run")
        exchange = ChainExchange.connect(config, account)
        exchange.check_can_join(account.address)
        if stop.requested:
            return
        out.echo(f"peer {account.address}: loading {config.model.source} ...")
        from node.round.factory import build_node  # torch and transformers load only now

        node = build_node(config, account, exchange)
    settings = LoopSettings(
        collect_fraction=config.round.collect_fraction,
        poll_interval=config.round.poll_interval,
        max_rounds=rounds or config.round.max_rounds,
    )
    out.echo(f"running on {config.chain.rpc_url}; Ctrl-C to stop")
    try:
        with _user_errors():
            done = run_node(
                node,
                settings,
                stop=stop,
                on_report=lambda r: out.echo(r.line()),
                on_notice=out.echo,
            )
    except KeyboardInterrupt:
        raise click.ClickException(
            "aborted; the state file was saved, the adapter of the "
            "last completed round is in the checkpoint"
        ) from None
    state_lock.close()
    out.echo(f"stopped after {done} round(s); state and adapter in {node.state_dir}")


_DEMO = LocalSwarmSettings()  # the demo's defaults, shown by `swarm local up --help`


@main.group()
def local() -> None:
    """A whole swarm on this machine: chain, contracts, store, nodes, indexer."""


@local.command("up")
@click.option(
    "--nodes", default=_DEMO.nodes, show_default=True, type=click.IntRange(2, 10), help="Nodes."
)
@click.option(
    "--rounds", default=_DEMO.rounds, show_default=True, type=click.IntRange(min=1), help="Rounds."
)
@click.option(
    "--model",
    default=_DEMO.node.model.source,
    show_default=True,
    help="Base model shared by the nodes: smollm2-135m, tiny (random, instant), or a folder.",
)
@click.option(
    "--workdir",
    default=_DEMO.workdir,
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Working folder (recreated): chain log, keystores, store, node states.",
)
@click.option(
    "--anvil-port",
    type=click.IntRange(0, 65535),
    help=f"Port of the local chain; it must be free (0: any free port) "
    f"[default: {DEFAULT_ANVIL_PORT}, or a free port if that is taken].",
)
@click.option(
    "--indexer-port",
    type=click.IntRange(0, 65535),
    help=f"Port of the leaderboard; it must be free (0: any free port) "
    f"[default: {DEFAULT_INDEXER_PORT}, or a free port if that is taken].",
)
@click.option("--no-indexer", is_flag=True, help="Do not start the indexer and leaderboard.")
@click.option(
    "--keep/--no-keep",
    default=True,
    show_default=True,
    help="Keep the chain and leaderboard up after the rounds, until Ctrl-C.",
)
@click.option(
    "--tasks",
    "tasks_per_round",
    default=_DEMO.node.tasks.tasks_per_round,
    show_default=True,
    help="Tasks per round.",
)
@click.option(
    "--group-size",
    default=_DEMO.node.sampling.group_size,
    show_default=True,
    help="Completions per task (G).",
)
@click.option(
    "--local-groups",
    default=_DEMO.node.sampling.local_groups,
    show_default=True,
    help="I: own groups trained on.",
)
@click.option(
    "--external-groups",
    default=_DEMO.node.sampling.external_groups,
    show_default=True,
    help="J: peers' groups.",
)
@click.option(
    "--max-new-tokens",
    default=_DEMO.node.generation.max_new_tokens,
    show_default=True,
    help="Longest completion.",
)
@click.option(
    "--store",
    type=click.Choice(["local", "kubo"]),
    default=_DEMO.store,
    show_default=True,
    help="local: one store folder shared by the nodes; kubo: a private Kubo daemon per node.",
)
@click.option(
    "--processes",
    is_flag=True,
    help="Run every node as its own `swarm run` process in real time (1 s blocks, no time "
    "travel), each with its own Kubo daemon (implies --store kubo).",
)
@click.option(
    "--round-seconds",
    default=_DEMO.round_seconds,
    show_default=True,
    type=click.IntRange(min=5),
    help="Length of a real-time round (--processes).",
)
def local_up(
    nodes: int,
    rounds: int,
    model: str,
    workdir: Path,
    anvil_port: int | None,
    indexer_port: int | None,
    no_indexer: bool,
    keep: bool,
    tasks_per_round: int,
    group_size: int,
    local_groups: int,
    external_groups: int,
    max_new_tokens: int,
    store: str,
    processes: bool,
    round_seconds: int,
) -> None:
    """Start Anvil, deploy, register N funded keystores, run N nodes for R rounds.

    \b
    By default the nodes share one base model, each with its own LoRA adapter, and run in
    lockstep: all publish, then all verify, judge and train; then the chain's clock jumps to
    the next round (the quick look). With --processes every node is its own `swarm run`
    process with its own Kubo daemon, keystore, state and model cache, and rounds last
    --round-seconds of wall-clock time. The indexer and leaderboard start when installed.
    Ctrl-C, SIGTERM, SIGHUP (a closed terminal) and a closed output pipe shut everything down
    cleanly; so does an error, with a one-line message.

    \b
    Examples:
      swarm local up --model tiny --rounds 2
      swarm local up --processes --model tiny --round-seconds 15 --rounds 5
    """
    from node.local.processes import run_process_swarm
    from node.local.up import run_local_swarm  # torch loads only for this command
    from node.round.loop import StopSignal

    node = with_overrides(
        _DEMO.node,
        {
            "model": {"source": model},
            "tasks": {"tasks_per_round": tasks_per_round},
            "sampling": {
                "group_size": group_size,
                "local_groups": local_groups,
                "external_groups": external_groups,
            },
            "generation": {"max_new_tokens": max_new_tokens},
        },
    )
    settings = LocalSwarmSettings(
        nodes=nodes,
        rounds=rounds,
        workdir=workdir,
        anvil_port=anvil_port,
        indexer_port=indexer_port,
        indexer=not no_indexer,
        node=node,
        store="kubo" if processes else store,
        processes=processes,
        round_seconds=round_seconds,
    )
    stop = StopSignal()
    out = Output(on_lost=stop.request)  # a closed pipe or terminal: stop, as on Ctrl-C
    stop.install(out.error)

    def wait_after(leaderboard: str) -> None:
        if keep:
            out.echo(f"\nthe leaderboard stays up on {leaderboard}; Ctrl-C to shut down")
            while not stop.sleep(3600):
                pass

    run = run_process_swarm if processes else run_local_swarm
    try:
        with _user_errors():
            run(settings, echo=out.echo, should_stop=lambda: stop.requested, wait_after=wait_after)
    except KeyboardInterrupt:
        raise click.ClickException("aborted; everything it started was stopped") from None
    except (click.ClickException, click.Abort):
        raise
    except Exception as exc:  # noqa: BLE001 - one line for the user, the traceback in a file
        raise click.ClickException(_failure_line(exc, workdir)) from None
    out.echo("local swarm stopped")


def _failure_line(exc: Exception, workdir: Path) -> str:
    """One line for an unexpected error of ``swarm local up``; its traceback goes to
    ``workdir/error.log`` when the folder exists."""
    log = save_traceback(exc, workdir / "error.log") if workdir.is_dir() else save_traceback(exc)
    return unexpected_error_line(exc, log, after="everything it started was stopped")


main.add_command(experiment_command)
main.add_command(audit_command)


@main.command()
@click.option("--address", help="Peer to show [default: this node's keystore address].")
@click.option(
    "--rounds",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Recent rounds to explain: published or why not, committee verdicts, flags, rewards, "
    "disputes.",
)
@click.pass_context
def status(ctx: click.Context, address: str | None, rounds: int) -> None:
    """Show stake, state and what happened to each recent round's batch.

    \b
    Per round: published or why not (not registered, exiting, stake below the minimum, paused,
    no batch on the chain), where its judging stands (committees commit, then reveal), how many
    committee members agreed and flagged, the verified reward (median of their sums) beside the
    claimed one, and whether a dispute was settled and slashed.
    """
    from node.status_report import status_lines

    config = _config(ctx)
    if address is None:
        with _user_errors():
            address = keystore_address(config.identity.keystore.expanduser())
    with _user_errors():
        client, deployment = connect_chain(config)
        start = deployment.deployment_block
        for line in status_lines(client, address, rounds=rounds, start_block=start):
            click.echo(line)


@main.command()
@click.pass_context
def doctor(ctx: click.Context) -> None:
    """Check what this node needs, one line each with the fix; exit 1 if anything failed.

    \b
    The deployment file and the RPC (its chain id), the contract (code, not a reset chain),
    the keystore and its configured password, registration, stake and funds for 100 rounds,
    the clock against the chain's, the content store (and a Kubo daemon's announced peers),
    memory and disk for the configured model, group size and token limit.
    """
    from node.doctor import failed, report_lines, run_checks

    checks = run_checks(_config(ctx))
    for line in report_lines(checks):
        click.echo(line)
    if failed(checks):
        ctx.exit(1)


if __name__ == "__main__":
    main(prog_name=os.path.basename(__file__))
