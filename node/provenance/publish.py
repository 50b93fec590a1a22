"""An adapter in the content store: published as ``swarm.adapter/1`` bytes in 1 MiB chunks under a
manifest (``node.storage.chunked``), fetched back only if it is exactly that.

The manifest's digest is the adapter's address: chunking is fixed, so equal weights give equal
addresses on every store, and a publisher whose address equals another's copied its adapter.
A publisher pins what it publishes and unpins it (``release_adapter``) once the batch that names
it can no longer be judged, keeping the chunks its other adapters share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from node.provenance.adapter import MAX_ADAPTER_BYTES, decode_adapter, encode_adapter
from node.storage.base import ContentStore
from node.storage.chunked import chunk_list, get_chunked, put_chunked


def publish_adapter(store: ContentStore, state: Mapping[str, torch.Tensor]) -> bytes:
    """Stores ``state``'s canonical bytes, pinned; returns the adapter's address."""
    return put_chunked(store, encode_adapter(state), pin=True)


def fetch_adapter(
    store: ContentStore, address: bytes, *, max_bytes: int = MAX_ADAPTER_BYTES
) -> dict[str, torch.Tensor]:
    """The adapter at ``address``: the store's errors for what it cannot give (``NotFound``,
    ``DigestMismatch``, ``BadManifest``), ``AdapterFormatError`` for bytes that are not an
    adapter."""
    return decode_adapter(get_chunked(store, address, max_size=max_bytes), max_bytes=max_bytes)


def release_adapter(store: ContentStore, address: bytes, *, keep: Iterable[bytes] = ()) -> None:
    """Unpins the adapter at ``address`` and those of its chunks that no adapter in ``keep``
    (addresses the publisher still holds) uses: two adapters that differ in a few tensors share
    the chunks that hold the others, and a store's pin is a mark, not a count.

    A store shared by several publishers (the local swarm's folder) must not be released into
    this way: another publisher's adapter may share a chunk too."""
    keep = set(keep)  # read twice below: a generator would be empty the second time
    kept = {c for other in keep for c in chunk_list(store, other, max_size=MAX_ADAPTER_BYTES)[2]}
    _, _, chunks = chunk_list(store, address, max_size=MAX_ADAPTER_BYTES)
    for chunk in chunks:
        if chunk not in kept:
            store.unpin(chunk)
    if address not in keep:
        store.unpin(address)
