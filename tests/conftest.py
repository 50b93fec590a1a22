"""Shared pytest setup: the local-chain fixtures (tests/chain_fixtures.py) and the tiny model
(tests/model_fixtures.py), for every test."""

import warnings

# web3 imports websockets' legacy module when first imported; nothing here uses websockets.
warnings.filterwarnings("ignore", "websockets.legacy is deprecated", DeprecationWarning)

pytest_plugins = ["tests.chain_fixtures", "tests.model_fixtures"]
