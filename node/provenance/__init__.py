"""Provenance: showing that a batch's completions were sampled from its publisher's model.

- ``seeds``    each completion's public randomness: its seed and the uniform of each position
- ``sampler``  the seeded sampler ``swarm.sample/1`` (the pick) and a claimed token's margin
"""
