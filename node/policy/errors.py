"""The policy package's errors: one base, ``PolicyError``, for what a caller may want to catch.

Bad arguments (a negative temperature, an empty conversation) raise ``ValueError`` instead:
they are programming mistakes, not conditions to handle.
"""


class PolicyError(Exception):
    """Base of the errors raised by ``node.policy``."""


class ModelLoadError(PolicyError, RuntimeError):
    """A model or tokenizer cannot be loaded; the message says what to do."""


class CheckpointError(PolicyError):
    """A checkpoint cannot be saved or restored: corrupt, incomplete, or for another model."""
