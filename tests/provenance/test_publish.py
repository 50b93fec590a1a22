"""An adapter through a real local store: published pinned, fetched exactly, released for GC,
and anything else at its address refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from node.provenance.adapter import AdapterFormatError, encode_adapter
from node.provenance.publish import fetch_adapter, publish_adapter, release_adapter
from node.storage import LocalStore
from node.storage.chunked import put_chunked
from node.storage.errors import BadManifest, NotFound

ROWS = 640  # 640 x 576 float32 = 1.4 MiB: two chunks


@pytest.fixture
def state() -> dict[str, torch.Tensor]:
    draws = torch.Generator().manual_seed(0)
    return {
        "layers.0.q_proj.lora_A.weight": torch.randn(16, 576, generator=draws),
        "layers.0.q_proj.lora_B.weight": torch.randn(ROWS, 576, generator=draws),
    }


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


def test_an_adapter_comes_back_exactly_and_equal_weights_share_an_address(store, state) -> None:  # type: ignore[no-untyped-def]
    address = publish_adapter(store, state)
    fetched = fetch_adapter(store, address)
    assert fetched.keys() == state.keys() and all(torch.equal(fetched[k], state[k]) for k in state)
    other = LocalStore(store.root.parent / "other")
    assert publish_adapter(other, dict(reversed(list(state.items())))) == address


def test_a_released_adapter_is_collected_and_a_kept_one_is_not(store, state) -> None:  # type: ignore[no-untyped-def]
    kept = publish_adapter(store, state)
    changed = {**state, "layers.0.q_proj.lora_A.weight": torch.zeros(16, 576)}
    released = publish_adapter(store, changed)
    release_adapter(store, released, keep=[kept])  # they share the chunk holding lora_B's tail
    store.gc(older_than=-1)
    assert torch.equal(fetch_adapter(store, kept)["layers.0.q_proj.lora_B.weight"], state["layers.0.q_proj.lora_B.weight"])
    with pytest.raises(NotFound):
        fetch_adapter(store, released)


def test_releasing_without_saying_what_is_kept_would_break_a_sharing_adapter(store, state) -> None:  # type: ignore[no-untyped-def]
    """Why ``keep`` exists: pins are marks, and adapters share chunks."""
    kept = publish_adapter(store, state)
    released = publish_adapter(store, {**state, "layers.0.q_proj.lora_A.weight": torch.ones(16, 576)})
    release_adapter(store, released)
    store.gc(older_than=-1)
    with pytest.raises(NotFound):
        fetch_adapter(store, kept)


def test_what_is_not_an_adapter_is_refused(store, state) -> None:  # type: ignore[no-untyped-def]
    not_an_adapter = put_chunked(store, b"\0" * 4096)
    with pytest.raises(AdapterFormatError):
        fetch_adapter(store, not_an_adapter)
    address = publish_adapter(store, state)
    with pytest.raises(BadManifest, match="not within"):
        fetch_adapter(store, address, max_bytes=len(encode_adapter(state)) - 1)
    with pytest.raises(BadManifest):
        fetch_adapter(store, store.put(encode_adapter(state)[:1000]))  # bytes where a manifest goes


def test_what_is_kept_may_be_given_as_any_iterable(store, state) -> None:  # type: ignore[no-untyped-def]
    kept = publish_adapter(store, state)
    release_adapter(store, kept, keep=(a for a in [kept]))  # releasing what is kept: a no-op
    assert store.is_pinned(kept)
    store.gc(older_than=-1)
    assert fetch_adapter(store, kept).keys() == state.keys()
