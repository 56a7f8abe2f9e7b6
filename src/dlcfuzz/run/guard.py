"""What keeps a campaign folder whole around its store: one writer at a time (an OS lock on
``CAMPAIGN/writer.lock``), and the one line that says what to free when its file system is full.

The lock is ``fcntl.flock`` on a file in the folder: the kernel releases it when its process dies,
however it dies (``kill -9`` included), so a stale lock is simply taken over by the next writer.
The pid written inside only names the live writer in the refusal; readers never take the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
from pathlib import Path

LOCK_FILE = "writer.lock"
# errors of a file system that takes no more writes: full, over quota, read-only
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
# SQLite's words for the same (sqlite3.OperationalError carries no errno)
FULL_SQLITE = ("database or disk is full", "attempt to write a readonly database")


class CampaignBusy(Exception):
    """Another live process writes to the campaign folder."""


class CampaignLock:
    """The writer's lock on a campaign folder, held until ``release`` (or the process's death)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> CampaignLock:
        """Takes the lock, or raises CampaignBusy naming the live writer's pid."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise CampaignBusy(f"{self.folder} is in use: {who} is writing to it (a campaign runs there); "
                               "wait for it to end, or use another --out folder") from None
        except OSError:
            os.close(fd)
            raise
        try:  # the pid, for the refusal a second writer gets (best effort: a full disk keeps the lock)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def holder(folder: Path) -> int | None:
    """The pid of the live process writing to ``folder``, or None when no process holds its lock."""
    path = folder / LOCK_FILE
    if not path.is_file():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def is_full(e: BaseException) -> bool:
    """Whether ``e`` says that the file system takes no more writes (full, over quota, read-only)."""
    if isinstance(e, OSError) and e.errno in FULL_ERRNOS:
        return True
    text = str(e).lower()  # SQLite's errors (and the StoreError that carries one) have no errno
    return any(s in text for s in (*FULL_SQLITE, "no space left on device", "read-only file system"))


def _size(path: Path) -> int:
    if path.is_symlink() or not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):  # gone meanwhile
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def space_line(folder: Path, e: BaseException | None = None) -> str:
    """One line: the file system of ``folder`` is full (or read-only), how much it holds and what uses
    the space in the campaign folder, biggest first, and that the same command resumes."""
    folder = folder.resolve()
    where = folder if folder.exists() else folder.parent
    parts, mine = [], 0
    if folder.is_dir():
        sizes = sorted(((_size(p), p.name + ("/" if p.is_dir() else "")) for p in folder.iterdir()), reverse=True)
        parts = [f"{name} {_mib(n)}" for n, name in sizes[:5] if n]
        mine = sum(n for n, _ in sizes)
    try:
        du = shutil.disk_usage(where)
        room = f"{_mib(du.free)} free of {_mib(du.total)}, {_mib(du.used)} used"
        if du.used > 2 * mine:  # most of it is not this campaign's
            parts.append(f"and outside it, on the same file system, {_mib(du.used - mine)}")
    except OSError:
        room = "free space unknown"
    read_only = (isinstance(e, OSError) and e.errno == errno.EROFS) or "readonly" in str(e or "").lower()
    uses = f"this campaign uses {', '.join(parts) or 'nothing yet'}"
    if read_only:
        return (f"the file system of {folder} is read-only ({e}); what committed is kept: make it writable ({uses}), "
                "then rerun the same command to resume")
    return (f"the file system of {folder} is full ({room}; {e if e is not None else 'no space left'}); "
            f"what committed is kept: free space there ({uses}), then rerun the same command to resume")
