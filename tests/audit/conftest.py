"""The audit tests run on the indexer tests' Anvil (tests/indexer/conftest.py)."""

from tests.indexer.conftest import anvil  # noqa: F401 - the session's Anvil for these tests too
