"""Storage tests run with fsync turned into a no-op: the disks of CI machines make real fsyncs cost
milliseconds each, and no test here depends on them (the power-loss tests model durability explicitly in
:mod:`tests.storage.powerloss`; a SIGKILL does not lose the page cache)."""

from __future__ import annotations

import pytest

from storage import fileio


class NoSyncFileIO(fileio.FileIO):
    def fsync(self, fd: int) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass

    def msync(self, mm, path: str) -> None:
        pass


@pytest.fixture(autouse=True)
def _no_fsync():
    previous = fileio.current
    fileio.current = NoSyncFileIO()
    yield
    fileio.current = previous
