"""The indexer records EndpointAnnounced and shows each peer's latest announcement, as announced."""

from __future__ import annotations

import pytest

from coordinator_indexer import queries
from tests.storage.test_endpoint import ALICE_KEY

pytestmark = pytest.mark.integration

ETHER = 10**18


def test_the_latest_announcement_of_each_peer_is_shown_as_announced(
    chain, client_for, dev_accounts, make_indexer
) -> None:
    moving, junk, quitter, silent = (client_for(a) for a in dev_accounts[1:5])
    for index, client in enumerate((moving, junk, quitter, silent)):
        client.register(f"peer-{index}", ETHER)
    first = ALICE_KEY.announcement(moving.account_address, "/ip4/93.184.216.34/tcp/4001")
    moved = ALICE_KEY.announcement(moving.account_address, "/ip4/93.184.216.34/tcp/4101")
    moving.announce_endpoint(first)
    receipt = moving.announce_endpoint(moved)
    junk.announce_endpoint(b"\xff\xfe not UTF-8")
    quitter.announce_endpoint(first)
    quitter.announce_endpoint(b"")

    indexer = make_indexer()
    indexer.sync()
    peers = (moving, junk, quitter, silent)
    with indexer.store.engine.connect() as conn:
        shown = {c.account_address: queries.peer(conn, c.account_address) for c in peers}
    assert shown[moving.account_address]["endpoint"] == {
        "data": "0x" + moved.hex(),
        "text": moved.decode(),
        "block_number": receipt.block_number,
        "tx_hash": receipt.tx_hash,
    }
    assert shown[junk.account_address]["endpoint"]["text"] is None
    assert shown[junk.account_address]["endpoint"]["data"] == "0x" + b"\xff\xfe not UTF-8".hex()
    assert shown[quitter.account_address]["endpoint"] is None  # withdrawn
    assert shown[silent.account_address]["endpoint"] is None
    with indexer.store.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT COUNT(*) FROM endpoints").scalar()
    assert rows == 5
