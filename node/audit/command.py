"""``swarm audit ROUND``: the click command. Exit status 0 when every batch agrees, 1 on a
DISAGREEMENT, 2 when the audit could not be done (a one-line reason on stderr)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from node.audit.audit import AuditError, AuditSettings, audit_round
from node.chain.errors import ChainError
from node.config import ConfigError, NodeConfig, load_config
from node.sampling.tokens import TokenCheck
from node.storage import ContentStore, StoreError, open_store
from node.tasks import TaskError

if TYPE_CHECKING:
    from node.provenance.peer_check import Recomputer

EXIT_AGREE, EXIT_DISAGREE, EXIT_ERROR = 0, 1, 2


def _load(ctx: click.Context) -> NodeConfig:
    """The node's configuration as the other commands read it (``swarm --config``)."""
    obj = ctx.find_root().obj or {}
    path: Path = obj.get("config_path", Path("node.toml"))
    if not path.exists() and not obj.get("config_given", False):
        return NodeConfig()
    return load_config(path)


def _model(source: str, store: ContentStore) -> tuple[TokenCheck, frozenset[str], Recomputer]:
    """The node's tokenizer, which counts and decodes batches' token ids, its base model's
    weights digest, which batches must name, and what recomputes their samples (transformers
    loads here, not on import)."""
    from node.policy.adapters import AdapterPool, base_weights
    from node.policy.model import ModelLoadError, load_base
    from node.policy.peer_ids import PeerIds
    from node.provenance.adapter import weights_digest
    from node.provenance.peer_check import Recomputer

    try:
        base = load_base(source)
    except (ModelLoadError, OSError) as exc:
        raise ValueError(f"cannot load the model {source!r}: {exc}") from None
    digest = "0x" + weights_digest(base_weights(base.model)).hex()
    pool = AdapterPool(base)
    pool.add("auditor")  # active between recomputes, so that peers' adapters can be swapped
    return PeerIds(base.tokenizer), frozenset({digest}), Recomputer(pool, base.tokenizer, store)


def _fail(ctx: click.Context, message: str) -> None:
    click.echo(f"error: {message}", err=True)
    ctx.exit(EXIT_ERROR)


@click.command("audit")
@click.argument("round", type=click.IntRange(min=0))
@click.option(
    "--indexer",
    "indexer_url",
    metavar="URL",
    help="Also compare with this leaderboard (its /api/rounds/ROUND), e.g. http://127.0.0.1:8600.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as canonical JSON.")
@click.pass_context
def audit(ctx: click.Context, round: int, indexer_url: str | None, as_json: bool) -> None:
    """Re-verify every batch of ROUND from the chain and the store, and compare.

    \b
    Each batch is fetched by its on-chain digest from the configured store, re-hashed and
    re-scored completion by completion, exactly as a node verifies it; the result is compared
    with the committee's votes and outcome on the chain (and with --indexer's leaderboard).
    Prints a receipt (per batch: digest, own check, committee votes and weights, outcome,
    agreement or DISAGREEMENT) ending with the SHA-256 of its canonical JSON.
    Exit status: 0 all agree, 1 a disagreement, 2 the audit could not be done.
    """
    from node.chain.client import CoordinatorClient
    from node.chain.deployment import Deployment

    try:
        config = _load(ctx)
        deployment = Deployment.load(config.chain.deployment.expanduser())
        client = CoordinatorClient.connect(
            config.chain.rpc_url, deployment, timeout=config.chain.rpc_timeout
        )
        setting = config.storage.store
        store = open_store(
            Path(setting).expanduser() if "://" not in setting else setting,
            timeout=config.storage.fetch_timeout,
        )
        settings = AuditSettings(
            per_fetch_timeout=config.storage.fetch_timeout,
            total_budget=max(config.storage.fetch_budget, 60.0),
            indexer_url=indexer_url,
        )
        tokens, bases, recomputer = _model(config.model.source, store)
        result = audit_round(
            client,
            store,
            round,
            start_block=deployment.deployment_block,
            tokens=tokens,
            bases=bases,
            settings=settings,
            recomputer=recomputer,
        )
    except (AuditError, ChainError, ConfigError, StoreError, TaskError, ValueError) as exc:
        _fail(ctx, str(exc))
        return
    if as_json:
        click.echo(result.json_report())
    else:
        for line in result.lines():
            click.echo(line)
    ctx.exit(EXIT_AGREE if result.agrees else EXIT_DISAGREE)
