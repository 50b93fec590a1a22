"""The ``swarm`` command as a separate process, with the integration tests' answering learner.

``python -m tests.integration.node_process --config node.toml run`` is ``swarm`` with every node
built with :class:`AnsweringLearner` (the tiny model's samples, every other one followed by the
reference answer, so that groups carry a learning signal); ``SWARM_TEST_NODE=inflating`` makes
the node claim reward 1.0 for every completion. Everything else is the real command.
"""

from __future__ import annotations

import functools
import os

from node import cli
from node.round import factory
from node.round.node import SwarmNode
from tests.integration.swarm import AnsweringLearner, InflatingNode

NODE_CLASSES: dict[str, type[SwarmNode]] = {"": SwarmNode, "inflating": InflatingNode}


def main() -> None:
    node_class = NODE_CLASSES[os.environ.get("SWARM_TEST_NODE", "")]
    factory.build_node = functools.partial(  # type: ignore[assignment]
        factory.build_node, learner_class=AnsweringLearner, node_class=node_class
    )
    cli.main(prog_name="swarm")


if __name__ == "__main__":
    main()
