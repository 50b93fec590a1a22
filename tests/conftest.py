"""Shared pytest setup: the local-chain fixtures (tests/chain_fixtures.py) are available to every test."""

pytest_plugins = ["tests.chain_fixtures"]
