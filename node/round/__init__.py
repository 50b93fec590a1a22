"""The round orchestration: the one place where chain, storage and policy meet.

- ``node``      :class:`SwarmNode`, one peer's round: produce, then complete (collect, verify,
                train, attest, settle, checkpoint), restart-safe
- ``produce``   steps 1-2: the node's own batch, built, stored and published exactly once
- ``core``      what both halves share: settings, identity, chain context, the state file
- ``own``       the node's own batch as published and as trained on
- ``attestations``  when a verdict may be attested (the contract's rules, pure)
- ``loop``      ``run_node``: one node following chain rounds in real time (``swarm run``)
- ``lockstep``  many in-process nodes stepping through rounds together (local swarm, tests)
- ``learner``   the node's policy seen from here: generate, train, checkpoint
- ``view``      active peers and commitments from events; chain reset detection
- ``state``     the protocol state file (own batches, judged commitments, pending attestations)
- ``report``    what a round did and how long each phase took
- ``retry``     backoff for transient store failures
- ``factory``   a node from a ``NodeConfig``
"""
