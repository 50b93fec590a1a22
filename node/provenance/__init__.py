"""Provenance: showing that a batch's completions were sampled from its publisher's model.

- ``seeds``      each completion's public randomness: its seed and the uniform of each position
                 (torch-free)
- ``sampler``    the seeded sampler ``swarm.sample/1`` (the pick) and a claimed token's margin
- ``recompute``  a group teacher-forced through a model: every token's margin
- ``adapter``    a LoRA adapter as canonical bytes (``swarm.adapter/1``), what a batch commits to
- ``publish``    an adapter in the content store: chunked, pinned, fetched strictly, released
- ``choice``     which seats recompute a batch and which of its groups (torch-free), the odds
- ``check``      a seat's check: recompute the chosen groups, apply the two tolerances
- ``model_info`` a batch's LoRA shape and the adapter settings it stands for
- ``peer_check`` a receiver's check of the peer groups it would train on
"""
