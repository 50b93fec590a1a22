"""The local swarm: a dev chain, keystores, nodes and the indexer on one machine (``swarm local up``)."""
