"""The round orchestration: the one place where chain, storage and policy meet.

- ``node``      :class:`SwarmNode`, one peer's round: produce, then complete (collect, judge,
                reveal, settle, train, checkpoint), restart-safe
- ``produce``   steps 1-2: the node's own batch, built, stored and published exactly once
- ``core``      what both halves share: settings, identity, chain context, the state file
- ``own``       the node's own batch as published and as trained on
- ``ballots``   the judging decisions as pure functions: fetch sample, seats, ballots, reveals,
                settlements, agreement reports
- ``injudging`` the contract's judging rules in memory, for the in-process exchange
- ``loop``      ``run_node``: one node following chain rounds in real time (``swarm run``)
- ``lockstep``  many in-process nodes stepping through rounds together (local swarm, tests)
- ``learner``   the node's policy seen from here: generate, train, checkpoint
- ``view``      active peers and commitments from events; chain reset detection
- ``state``     the protocol state file (own batches, cached verdicts, ballots and salts, flags)
- ``report``    what a round did and how long each phase took
- ``sample_stats`` the node's own completions of a round: cut and format rates, samples
- ``retry``     backoff for transient store failures
- ``factory``   a node from a ``NodeConfig``
"""
