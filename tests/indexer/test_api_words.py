"""The API's own index (``GET /api/``) and its words: the protocol's (verdicts, voter, pending),
with protocol v1's names still answered beside them, deprecated, for one release."""

from __future__ import annotations

import pytest

from tests.indexer.test_api import get

pytestmark = pytest.mark.integration

#: Deprecated name -> its new name, per kind of answer (docs/API.md, "Deprecated names").
DEPRECATED = {
    "LeaderboardEntry": {"attestations_given": "verdicts_counted"},
    "PeerDetail": {"attestations_given": "verdicts_counted"},
    "Batch": {"attestations": "verdicts_counted"},
    "Vote": {"attester": "voter"},
    "RoundEntry": {"attested_batches": "batches_with_verdicts", "attestations": "verdicts_counted"},
    "RoundDetail": {
        "attested_batches": "batches_with_verdicts",
        "attestations": "verdicts_counted",
    },
    "Stats": {"attested_batches": "batches_with_verdicts", "attestations": "verdicts_counted"},
}


def test_the_api_index_lists_every_endpoint_and_each_answers(served) -> None:
    service, swarm = served
    response = get(service, "/api/")
    assert response.status_code == 200
    index = response.json()
    endpoints = index["endpoints"]
    paths = [e["path"] for e in endpoints]
    spec_paths = set(get(service, "/openapi.json").json()["paths"])
    assert set(paths) == spec_paths | {"/openapi.json"}
    assert len(set(paths)) == len(paths) and len({e["name"] for e in endpoints}) == len(endpoints)
    for endpoint in endpoints:
        assert endpoint["name"] and endpoint["description"].strip(), endpoint
        assert "\n" not in endpoint["description"] and len(endpoint["description"]) <= 100
        assert endpoint["deprecated"] is False  # no path was renamed
    assert "docs/API.md" in index["docs"]
    filled = {"{address}": swarm.address("alice"), "{round}": str(swarm.round)}
    for path in paths:
        for placeholder, value in filled.items():
            path = path.replace(placeholder, value)
        assert get(service, path).status_code == 200, path
    assert get(service, "/api").json() == index  # without the slash: redirected to the index


def test_answers_use_the_protocols_words_and_keep_the_old_names(served) -> None:
    """Every answer carries the new names and, with the same value, the deprecated ones."""
    service, swarm = served
    board = {e["name"]: e for e in get(service, "/api/leaderboard").json()["entries"]}
    assert (board["dave"]["verdicts_counted"], board["frank"]["verdicts_counted"]) == (6, 1)
    carol = get(service, f"/api/peers/{swarm.address('carol')}").json()
    rounds = get(service, "/api/rounds").json()["entries"]
    assert [(r["batches_with_verdicts"], r["verdicts_counted"]) for r in rounds] == [
        (4, 13),
        (4, 12),
    ]
    one = get(service, f"/api/rounds/{swarm.round}").json()
    votes = [vote for batch in one["batches"] for vote in batch["votes"]]
    assert {v["voter"] for v in votes} == {
        swarm.address(n) for n in ("alice", "bob", "carol", "dave", "frank")
    }
    stats = get(service, "/api/stats").json()
    assert (stats["verdicts_counted"], stats["batches_with_verdicts"]) == (25, 8)
    answers = {
        "LeaderboardEntry": list(board.values()),
        "PeerDetail": [carol],
        "Batch": carol["batches"] + one["batches"],
        "Vote": votes,
        "RoundEntry": rounds,
        "RoundDetail": [one],
        "Stats": [stats],
    }
    for kind, objects in answers.items():
        assert objects, kind
        for answer in objects:
            for old, new in DEPRECATED[kind].items():
                assert answer[old] == answer[new], (kind, old, answer)
    text = get(service, "/api/stats").text + get(service, f"/api/rounds/{swarm.round}").text
    assert '"verdicts_counted"' in text and '"attestations"' in text  # both, for one release


def test_openapi_marks_the_old_names_deprecated(served) -> None:
    service, _ = served
    schemas = get(service, "/openapi.json").json()["components"]["schemas"]
    for kind, renamed in DEPRECATED.items():
        properties = schemas[kind]["properties"]
        for old, new in renamed.items():
            assert properties[old].get("deprecated") is True, (kind, old)
            assert new in properties[old]["description"]
            assert "removed in the next release" in properties[old]["description"]
            assert "deprecated" not in properties[new], (kind, new)
    for kind in ("Batch", "RoundEntry"):
        assert "pending" in schemas[kind]["properties"]
    assert "pending_batches" in schemas["LeaderboardEntry"]["properties"]
    assert "sum" in schemas["LeaderboardEntry"]["properties"]["verified_reward"]["description"]
