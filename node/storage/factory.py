"""``open_store``: a store from a URL or a path (the node's ``storage`` setting).

/var/lib/swarm/blobs, ./blobs, file:///var/lib/swarm/blobs  -> LocalStore
http://127.0.0.1:5001, https://ipfs.example:5001/api/v0     -> KuboStore (its RPC API)
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from node.storage.base import DEFAULT_MAX_BLOB_SIZE, ContentStore
from node.storage.kubo import DEFAULT_TIMEOUT, KuboStore
from node.storage.local import LocalStore


def open_store(
    url_or_path: str | Path,
    *,
    max_blob_size: int = DEFAULT_MAX_BLOB_SIZE,
    timeout: float = DEFAULT_TIMEOUT,
) -> ContentStore:
    """The store named by ``url_or_path``; ValueError for an unsupported URL scheme.

    ``timeout`` applies to network stores only.
    """
    if isinstance(url_or_path, Path):
        return LocalStore(url_or_path, max_blob_size=max_blob_size)
    parts = urllib.parse.urlsplit(url_or_path)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        return KuboStore(url_or_path, timeout=timeout, max_blob_size=max_blob_size)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"file URLs name a local path (file:///path), got {url_or_path!r}")
        path = urllib.parse.unquote(parts.path)
        return LocalStore(Path(path), max_blob_size=max_blob_size)
    if scheme and len(scheme) > 1:  # "c:" of a Windows drive letter is a path, not a scheme
        raise ValueError(
            f"unsupported store URL {url_or_path!r}: use a path, file:// or http(s)://"
        )
    return LocalStore(Path(url_or_path), max_blob_size=max_blob_size)
