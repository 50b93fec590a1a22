"""``LocalStore``: a content-addressed directory, safe for many processes at once.

Layout under ``root``::

    blobs/ab/ab12...ef        one file per blob, named by its hex digest, sharded by 2 hex digits
    blobs/ab/.tmp-...         a write in progress (or left by a killed process: ignored, GC'd)
    pins/ab12...ef            an empty marker: the blob survives garbage collection
    lock                      flock'ed: shared by put/pin, exclusive by gc

Writes are atomic: the bytes go to a temporary file in the blob's own directory, are fsync'ed,
and ``os.replace`` moves them into place, so a reader sees the whole blob or none of it and
any number of processes may write the same or different blobs concurrently. Every read is
re-hashed (DigestMismatch if the disk returned other bytes); a put of a blob that exists but is
damaged rewrites it. A blob's mtime is its last put or pin; ``gc(older_than)`` deletes unpinned
blobs not touched for that long. put/pin and gc exclude each other through the lock file, so
a blob that ``put`` just confirmed cannot be collected under it. POSIX only (``fcntl.flock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from node.storage.base import DEFAULT_MAX_BLOB_SIZE, ContentStore, check_digest, sha256, verified
from node.storage.errors import NotFound, StoreUnavailable, TooLarge

_TEMP_PREFIX = ".tmp-"


class LocalStore(ContentStore):
    """Blobs in files under ``root`` (created if missing)."""

    def __init__(self, root: Path | str, *, max_blob_size: int = DEFAULT_MAX_BLOB_SIZE) -> None:
        self.root = Path(root)
        self.max_blob_size = max_blob_size
        self._blobs = self.root / "blobs"
        self._pins = self.root / "pins"
        self._blobs.mkdir(parents=True, exist_ok=True)
        self._pins.mkdir(parents=True, exist_ok=True)
        self._lock_path = self.root / "lock"
        self._lock_path.touch(exist_ok=True)

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def path_of(self, digest: bytes) -> Path:
        """Where the blob with ``digest`` lives (whether or not it exists)."""
        name = check_digest(digest).hex()
        return self._blobs / name[:2] / name

    def put(self, data: bytes, *, pin: bool = False) -> bytes:
        data = self._blob_to_put(data)
        digest = sha256(data)
        path = self.path_of(digest)
        with _os_errors(f"storing 0x{digest.hex()} in {self.root}"), self._locked(fcntl.LOCK_SH):
            if self._intact(path, digest):
                os.utime(path)  # fresh again for gc
            else:
                self._write_atomically(path, data)
            if pin:
                (self._pins / digest.hex()).touch()
        return digest

    def get(self, digest: bytes, *, max_size: int | None = None) -> bytes:
        cap = self._read_cap(max_size)
        path = self.path_of(digest)
        try:
            with _os_errors(f"reading {path}"), open(path, "rb") as file:
                # read() allocates what it is asked for: ask for the file's size, not the cap
                size = os.fstat(file.fileno()).st_size
                data = file.read(min(size, cap) + 1)
        except FileNotFoundError:
            raise NotFound(f"no blob 0x{digest.hex()} in {self.root}") from None
        if len(data) > cap:
            raise TooLarge(f"blob 0x{digest.hex()} is over the {cap}-byte cap")
        return verified(digest, data, source=f"file {path}")

    def has(self, digest: bytes) -> bool:
        return self.path_of(digest).is_file()

    def pin(self, digest: bytes) -> None:
        path = self.path_of(digest)
        with _os_errors(f"pinning 0x{digest.hex()} in {self.root}"), self._locked(fcntl.LOCK_SH):
            if not path.is_file():
                raise NotFound(f"cannot pin 0x{digest.hex()}: not in {self.root}")
            (self._pins / digest.hex()).touch()
            os.utime(path)

    def unpin(self, digest: bytes) -> None:
        """Lets ``digest`` be garbage-collected again (no error if it was not pinned)."""
        (self._pins / check_digest(digest).hex()).unlink(missing_ok=True)

    def is_pinned(self, digest: bytes) -> bool:
        """Whether ``digest`` is pinned."""
        return (self._pins / check_digest(digest).hex()).exists()

    def gc(self, older_than: float) -> int:
        """Deletes unpinned blobs (and stale temporary files) untouched for ``older_than``
        seconds; returns how many blobs were deleted."""
        cutoff = time.time() - older_than
        removed = 0
        with self._locked(fcntl.LOCK_EX):
            pinned = {entry.name for entry in os.scandir(self._pins)}
            for entry in self._entries():
                try:
                    if entry.stat().st_mtime >= cutoff:
                        continue
                    is_temp = entry.name.startswith(_TEMP_PREFIX)
                    if not is_temp and entry.name in pinned:
                        continue
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue
                removed += not is_temp
        return removed

    def _entries(self) -> Iterator[os.DirEntry[str]]:
        for shard in os.scandir(self._blobs):
            if shard.is_dir():
                yield from (entry for entry in os.scandir(shard.path) if entry.is_file())

    def _intact(self, path: Path, digest: bytes) -> bool:
        try:
            with open(path, "rb") as file:
                return sha256(file.read(self.max_blob_size + 1)) == digest
        except FileNotFoundError:
            return False

    def _write_atomically(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f"{_TEMP_PREFIX}{path.name[:16]}-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.chmod(temp, 0o644)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        _fsync_directory(path.parent)

    @contextlib.contextmanager
    def _locked(self, mode: int) -> Iterator[None]:
        with open(self._lock_path, "rb") as lock:
            fcntl.flock(lock.fileno(), mode)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _os_errors(doing: str) -> Iterator[None]:
    """OSError (disk full, permissions, I/O) -> StoreUnavailable; a missing file passes through."""
    try:
        yield
    except FileNotFoundError:
        raise
    except OSError as error:
        raise StoreUnavailable(f"{doing}: {error}") from error


def _fsync_directory(directory: Path) -> None:
    """Makes a rename in ``directory`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
