"""``swarm-indexer``: index a SwarmCoordinator's events and serve the public leaderboard.

Errors a user can act on (a missing deployment file, an unreachable RPC or database, a busy port)
are printed as one line and exit non-zero; no traceback. An error that stops ingestion later (a
reorg deeper than the kept window) is printed too, but ``run`` keeps answering 503 with it.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from coordinator_indexer.errors import IndexerError
from coordinator_indexer.ingest import Indexer, IngestSettings
from coordinator_indexer.progress import ProgressPrinter
from coordinator_indexer.service import IndexerService, ServiceSettings
from coordinator_indexer.store import Store
from node.chain.deployment import Deployment
from node.chain.errors import ChainError
from node.chain.rpc import connect

DEFAULT_DB = "sqlite:///swarm-indexer.db"


def _echo(line: str) -> None:
    click.echo(line)
    sys.stdout.flush()


def _ingest_options(command: click.Command) -> click.Command:
    options = [
        click.option(
            "--rpc",
            "rpc_url",
            default="http://127.0.0.1:8545",
            show_default=True,
            envvar="SWARM_INDEXER_RPC",
            show_envvar=True,
            help="JSON-RPC URL of the chain the coordinator lives on.",
        ),
        click.option(
            "--deployment",
            type=click.Path(dir_okay=False, path_type=Path),
            default=Path("deployments/local.json"),
            show_default=True,
            envvar="SWARM_INDEXER_DEPLOYMENT",
            show_envvar=True,
            help="Deployment file written by swarm-deploy (coordinator address, first block).",
        ),
        click.option(
            "--db",
            "db_url",
            default=DEFAULT_DB,
            show_default=True,
            envvar="SWARM_INDEXER_DB",
            show_envvar=True,
            help="Database URL: sqlite:///path.db (embedded) or postgresql://user:pw@host/db.",
        ),
        click.option(
            "--confirmations",
            type=click.IntRange(min=0),
            default=12,
            show_default=True,
            help="Blocks below the head after which a block is final. Reorgs up to this depth "
            "are rolled back and re-applied; a deeper one stops the indexer.",
        ),
        click.option(
            "--max-range",
            type=click.IntRange(min=1),
            default=2000,
            show_default=True,
            help="Most blocks per eth_getLogs range and per database transaction (halved "
            "automatically when the RPC refuses a range or a range is very busy).",
        ),
        click.option(
            "--read-ahead",
            type=click.IntRange(min=0),
            default=32,
            show_default=True,
            help="Blocks behind the head from which reader processes (one per core, at most "
            "four) read the next ranges while the database takes the current ones (faster "
            "catch-up on two or more cores); 0 reads in line.",
        ),
        click.option(
            "--poll-interval",
            type=click.FloatRange(min=0.01),
            default=1.0,
            show_default=True,
            help="Seconds between polls once caught up with the head.",
        ),
        click.option("--verbose", "-v", is_flag=True, help="Also report ranges with events."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _settings(
    confirmations: int, max_range: int, read_ahead: int, poll_interval: float
) -> IngestSettings:
    return IngestSettings(
        confirmations=confirmations,
        max_range=max_range,
        read_ahead=read_ahead,
        poll_interval=poll_interval,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Index a swarm coordinator's events into a database and serve the public leaderboard.

    \b
    The indexer reads the coordinator's events (eth_getLogs over block ranges), keeps the
    hashes of the last --confirmations blocks to detect reorgs and roll them back, and
    stores everything with its cursor in one transaction per range: kill it at any moment
    and it resumes where it was. Peers are ranked by *verified* reward: the stake-weighted
    median of what each batch's committee revealed (nothing once its dispute was settled
    upheld or inconclusive), not what the peer claimed (both are shown), beside their
    committee duty done and missed.

    \b
    Start with a local chain (swarm-deploy wrote deployments/local.json):
      swarm-indexer run --rpc http://127.0.0.1:8545 --deployment deployments/local.json \\
                        --db sqlite:///swarm-indexer.db --port 8600
      open http://127.0.0.1:8600/            the leaderboard page
      curl http://127.0.0.1:8600/health      lag in blocks; API under /api, schema /openapi.json

    --rpc, --deployment and --db may also come from SWARM_INDEXER_RPC, SWARM_INDEXER_DEPLOYMENT
    and SWARM_INDEXER_DB (a Postgres URL with a password stays off the command line).
    """


@main.command()
@_ingest_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8600,
    show_default=True,
    help="Port to listen on (0: any free port; the URL is printed).",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the server's URL to this file once it accepts connections (for launchers).",
)
def run(
    rpc_url: str,
    deployment: Path,
    db_url: str,
    confirmations: int,
    max_range: int,
    read_ahead: int,
    poll_interval: float,
    verbose: bool,
    host: str,
    port: int,
    ready_file: Path | None,
) -> None:
    """Ingest continuously and serve the API and leaderboard page.

    Prints `serving <url>` once the port accepts connections, then progress while catching
    up. If ingestion stops on an error (for example a reorg deeper than --confirmations), it
    prints the error and keeps serving: /health and every /api/ route answer 503 with the
    reason. Stops on Ctrl-C or SIGTERM: exit 0, or 1 if ingestion had stopped on an error.
    """
    settings = ServiceSettings(
        rpc_url=rpc_url,
        deployment=deployment,
        db_url=db_url,
        host=host,
        port=port,
        ingest=_settings(confirmations, max_range, read_ahead, poll_interval),
    )
    service = IndexerService(settings, write=_echo, verbose=verbose)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        service.stopped.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            url = service.start()
        except (IndexerError, ChainError) as exc:
            raise click.ClickException(str(exc)) from None
        _echo(f"serving {url} (leaderboard {url}, API {url}api/, health {url}health)")
        if ready_file is not None:
            ready_file.parent.mkdir(parents=True, exist_ok=True)
            ready_file.write_text(url + "\n", encoding="utf-8")
        while not service.wait(0.5):
            pass
    finally:
        service.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.is_set() and not service.failed.is_set():
        _echo("stopped")
        return
    raise click.ClickException(f"indexing stopped: {service.status.error or 'unknown reason'}")


@main.command()
@_ingest_options
def sync(
    rpc_url: str,
    deployment: Path,
    db_url: str,
    confirmations: int,
    max_range: int,
    read_ahead: int,
    poll_interval: float,
    verbose: bool,
) -> None:
    """Ingest up to the current head, then exit (no server). Safe to interrupt and rerun."""
    try:
        record = Deployment.load(deployment)
        store = Store.open(db_url)
    except (IndexerError, ChainError) as exc:
        raise click.ClickException(str(exc)) from None
    indexer: Indexer | None = None
    try:
        indexer = Indexer(
            connect(rpc_url, timeout=30),
            record,
            store,
            _settings(confirmations, max_range, read_ahead, poll_interval),
        )
        state = indexer.prepare()
        progress = ProgressPrinter(_echo, start_block=state.cursor_block, verbose=verbose)
        result = indexer.sync(on_step=progress.step)
        _echo(f"indexed to block {result.cursor:,} (head {result.head:,})")
    except (IndexerError, ChainError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        _echo("interrupted; the database holds every range applied so far")
        sys.exit(130)
    finally:
        if indexer is not None:
            indexer.close()
        store.close()


def entry() -> None:
    """Console-script entry point (``swarm-indexer``)."""
    main()
