"""A file-I/O layer that remembers what an fsync made durable, and simulates a power loss.

Model: a file's *content* is durable as of its last ``fsync`` (or ``msync`` of its mapping); directory
operations (create, rename, unlink) are durable at once (the storage engine fsyncs directories after them,
and an ext4-like filesystem orders them before later data).  On :meth:`PowerLossIO.power_loss`, every file
the storage engine wrote is put back to its durable content: unsynced writes (appends and overwrites) are
dropped, and a file never synced is left empty.  SIGKILL cannot show this: the page cache survives a killed
process.
"""

from __future__ import annotations

import os

from storage import fileio


class PowerLossIO(fileio.FileIO):
    def __init__(self) -> None:
        self.durable: dict[str, bytes] = {}
        self.fd_paths: dict[int, str] = {}
        self.fsyncs = 0

    @staticmethod
    def _read(path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def open(self, path, flags, mode=0o644):
        path = os.path.abspath(path)
        existed = os.path.exists(path)
        fd = super().open(path, flags, mode)
        self.fd_paths[fd] = path
        if not existed:
            self.durable.setdefault(path, b"")
        return fd

    def close(self, fd):
        self.fd_paths.pop(fd, None)
        super().close(fd)

    # The real fsync is skipped: durability is what this class records, and real syncs only slow tests.
    def fsync(self, fd):
        self.fsyncs += 1
        path = self.fd_paths.get(fd)
        if path is not None and os.path.exists(path):
            self.durable[path] = self._read(path)

    def msync(self, mm, path):
        self.fsyncs += 1
        path = os.path.abspath(path)
        if os.path.exists(path):
            self.durable[path] = self._read(path)

    def fsync_dir(self, path):
        pass

    def rename(self, src, dst):
        super().rename(src, dst)
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        if src in self.durable:
            self.durable[dst] = self.durable.pop(src)
        else:
            self.durable.pop(dst, None)
        for fd, p in list(self.fd_paths.items()):
            if p == src:
                self.fd_paths[fd] = dst

    def unlink(self, path):
        super().unlink(path)
        self.durable.pop(os.path.abspath(path), None)

    def power_loss(self) -> int:
        """Put every tracked file back to its durable content; returns how many files changed."""
        changed = 0
        for path, content in self.durable.items():
            if not os.path.exists(path):
                continue
            if self._read(path) != content:
                with open(path, "r+b") as f:
                    f.truncate(0)
                    f.write(content)
                changed += 1
        self.fd_paths.clear()
        return changed
