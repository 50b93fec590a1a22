"""Running the local swarm: services up, N nodes over one base model, R rounds, clean shutdown."""

from __future__ import annotations

from collections.abc import Callable

from node.chain.rpc import connect
from node.local.devchain import DevChain
from node.local.swarm import (
    Echo,
    LocalPeer,
    LocalSwarmSettings,
    Services,
    advance_clock,
    bring_up,
    print_where_to_look,
    summary_lines,
)
from node.policy.adapters import AdapterPool
from node.policy.model import load_base
from node.round.exchange import ChainExchange
from node.round.factory import build_node
from node.round.lockstep import run_lockstep
from node.round.node import SwarmNode
from node.round.report import RoundReport


def build_nodes(
    settings: LocalSwarmSettings, peers: list[LocalPeer], echo: Echo
) -> list[SwarmNode]:
    """One SwarmNode per peer, each from its own ``node.toml`` settings, all over one base
    model loaded once."""
    model = settings.node.model
    echo(f"loading {model.source} (shared by the {len(peers)} nodes) ...")
    pool = AdapterPool(load_base(model.source, device=model.device, dtype=model.dtype))
    nodes = []
    for peer in peers:
        exchange = ChainExchange.connect(peer.config, peer.account)
        name = peer.name.replace("-", "_")
        nodes.append(build_node(peer.config, peer.account, exchange, pool=pool, name=name))
    return nodes


def run_local_swarm(
    settings: LocalSwarmSettings,
    *,
    echo: Echo = print,
    should_stop: Callable[[], bool] = lambda: False,
    wait_after: Callable[[str], None] = lambda leaderboard: None,
) -> list[RoundReport]:
    """Brings the swarm up, runs it, and always takes everything down again.

    ``wait_after(leaderboard_url)`` is called after the rounds while everything is still up.
    """
    services = Services()
    try:
        swarm = bring_up(settings, services, echo)
        peers, leaderboard = swarm.peers, swarm.leaderboard
        nodes = build_nodes(settings, peers, echo)
        names = {node.address: peer.name for node, peer in zip(nodes, peers)}
        print_where_to_look(swarm.workdir, swarm.rpc_url, leaderboard, peers, echo)
        chain = DevChain(connect(swarm.rpc_url), swarm.deployment)
        # Stake deposited at registration judges from the next round: start there, so every
        # round the demo runs has its committees.
        advance_clock(chain)(chain.current_round() + 1)
        reports = run_lockstep(
            nodes,
            settings.rounds,
            advance_clock(chain),
            on_report=lambda report: echo(f"{names[report.peer]} {report.line()}"),
            should_stop=should_stop,
        )
        echo("")
        for line in summary_lines(reports, names):
            echo(line)
        if leaderboard is not None and not should_stop():
            wait_after(leaderboard)
        return reports
    finally:
        services.stop(echo)
