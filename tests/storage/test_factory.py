"""open_store: paths and file:// URLs give a LocalStore, http(s):// a KuboStore."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.storage import KuboStore, LocalStore, open_store


def test_paths_and_file_urls(tmp_path: Path) -> None:
    for name in (str(tmp_path / "a"), f"file://{tmp_path}/b", f"file://localhost{tmp_path}/c"):
        store = open_store(name)
        assert isinstance(store, LocalStore)
    assert open_store(tmp_path / "d").root == tmp_path / "d"
    assert open_store(f"file://{tmp_path}/with%20space").root == tmp_path / "with space"
    assert open_store(str(tmp_path / "e"), max_blob_size=10).max_blob_size == 10


def test_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("blobs")
    assert isinstance(store, LocalStore) and (tmp_path / "blobs" / "blobs").is_dir()


def test_kubo_urls() -> None:
    store = open_store("http://127.0.0.1:5001", timeout=3.0)
    assert isinstance(store, KuboStore) and store.timeout == 3.0
    assert isinstance(open_store("https://ipfs.example.org:5001/api/v0"), KuboStore)


@pytest.mark.parametrize("name", ["ftp://host/x", "s3://bucket/key", "file://otherhost/x"])
def test_unsupported(name: str) -> None:
    with pytest.raises(ValueError):
        open_store(name)
