"""PartWriter (broker/network/sendfile.py) on both event loops: byte parts and file slices arrive in order, byte for
byte.

Slices are several MiB against a small socket send buffer and a slow reader, so sendfile and writev return
short or EAGAIN and the writer waits for writability on its duplicate fd. The stdlib-loop run of the
metrics test checks the broker's zero-copy counters end to end on that loop too.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time

import pytest

from broker.network.sendfile import PartWriter, SendStats
from broker.node import new_event_loop
from storage.file_records import FileSlice
from tests.broker import test_metrics

LOOPS = ["uvloop", "asyncio"]


def _run_writer(kind: str, responses: list[list], zero_copy: bool, prefill: bytes = b"") -> tuple[bytes, SendStats]:
    """Serve ``responses`` (lists of parts) on one connection; a slow client reads everything back."""
    stats = SendStats()
    received = bytearray()
    loop = new_event_loop(kind)

    async def main() -> None:
        done = loop.create_future()

        async def handle(reader, writer) -> None:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            pw = PartWriter(writer, stats, zero_copy=zero_copy)
            try:
                if prefill:  # bytes left in the transport's buffer must go out before the next response
                    writer.write(prefill)
                for parts in responses:
                    await pw.write(parts)
            finally:
                pw.close()
                writer.close()
                done.set_result(None)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        def client() -> None:
            with socket.create_connection(("127.0.0.1", port)) as c:
                while True:
                    if len(received) < 2_000_000:  # slow at first: the writer meets EAGAIN
                        time.sleep(0.0005)
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    received.extend(chunk)

        t = threading.Thread(target=client, daemon=True)
        t.start()
        await asyncio.wait_for(done, 60)
        server.close()
        await server.wait_closed()
        await loop.run_in_executor(None, t.join, 30)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return bytes(received), stats


@pytest.fixture
def files(tmp_path):
    a = os.urandom(3 * 2**20 + 17)
    b = os.urandom(2**20 + 5)
    pa, pb = tmp_path / "a.log", tmp_path / "b.log"
    pa.write_bytes(a)
    pb.write_bytes(b)
    fa, fb = os.open(pa, os.O_RDONLY), os.open(pb, os.O_RDONLY)
    yield a, b, fa, fb
    os.close(fa)
    os.close(fb)


def _responses(a: bytes, b: bytes, fa: int, fb: int) -> tuple[list[list], bytes, int]:
    big = b"h" * 300_000  # a byte part larger than the socket buffer
    responses = [
        [b"head-1", FileSlice(fa, 0, 1000), FileSlice(fa, 1000, 2**20), b"mid", b"dle", FileSlice(fb, 3, 2**20),
         b"tail-1"],
        [b"bytes only " * 50],
        [big, FileSlice(fa, 2**20 + 1000, len(a) - 2**20 - 1000), FileSlice(fa, 0, 10), b"tail-2"],
        [FileSlice(fb, 0, len(b))],
    ]
    expected = (b"head-1" + a[:2**20 + 1000] + b"middle" + b[3:3 + 2**20] + b"tail-1" + b"bytes only " * 50
                + big + a[2**20 + 1000:] + a[:10] + b"tail-2" + b)
    slice_bytes = 2**20 + 1000 + 2**20 + (len(a) - 2**20 - 1000) + 10 + len(b)
    return responses, expected, slice_bytes


@pytest.mark.parametrize("kind", LOOPS)
def test_parts_arrive_in_order_with_sendfile(kind, files, monkeypatch):
    a, b, fa, fb = files
    waits = []
    writable = PartWriter._writable

    async def counted(self, fd):
        waits.append(fd)
        await writable(self, fd)

    monkeypatch.setattr(PartWriter, "_writable", counted)
    responses, expected, slice_bytes = _responses(a, b, fa, fb)
    got, stats = _run_writer(kind, responses, zero_copy=True, prefill=b"x" * 500_000)
    assert got == b"x" * 500_000 + expected
    assert stats.bytes == slice_bytes
    assert stats.copied_bytes == 0
    assert stats.calls >= 4  # contiguous slices of one file went out together, others separately
    assert waits, "the socket buffer never filled: EAGAIN / short sends were not exercised"


@pytest.mark.parametrize("kind", LOOPS)
def test_bytes_path_matches(kind, files):
    a, b, fa, fb = files
    responses, expected, slice_bytes = _responses(a, b, fa, fb)
    got, stats = _run_writer(kind, responses, zero_copy=False)
    assert got == expected
    assert stats.calls == 0 and stats.bytes == 0
    assert stats.copied_bytes == slice_bytes


def test_metrics_on_the_stdlib_loop(tmp_path, monkeypatch):
    """The metrics test (sendfile bytes == bytes stored, nothing copied) with event_loop="asyncio"."""
    real = test_metrics.EmbeddedBroker

    def stdlib_broker(*args, **kwargs):
        kwargs["event_loop"] = "asyncio"
        b = real(*args, **kwargs)
        assert not type(b._loop).__module__.startswith("uvloop")
        return b

    monkeypatch.setattr(test_metrics, "EmbeddedBroker", stdlib_broker)
    test_metrics.test_metrics_match_traffic(tmp_path)


@pytest.mark.parametrize("kind", LOOPS)
def test_the_bytes_path_copies_large_slices_in_bounded_pieces(kind, files, monkeypatch):
    """TLS: a slice is read and written COPY_CHUNK at a time (drained between), never whole; same bytes."""
    from broker.network import sendfile
    from storage.file_records import FileSlice

    monkeypatch.setattr(sendfile, "COPY_CHUNK", 1000)
    reads: list[int] = []
    real = FileSlice.read_part

    def counting(self, offset, size):
        reads.append(size)
        return real(self, offset, size)

    monkeypatch.setattr(FileSlice, "read_part", counting)
    a, b, fa, fb = files
    responses, expected, slice_bytes = _responses(a, b, fa, fb)
    got, stats = _run_writer(kind, responses, zero_copy=False)
    assert got == expected and stats.copied_bytes == slice_bytes
    assert reads and max(reads) <= 1000 and len(reads) >= slice_bytes // 1000


def test_the_duplicate_fd_is_closed_when_its_socket_wrapper_cannot_be_made(monkeypatch):
    """The writer duplicates the connection's fd for sendfile and setsockopt; if wrapping the duplicate fails, the
    duplicate is closed, not leaked."""
    server = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(server.getsockname())
    b, _ = server.accept()
    server.close()
    duplicated: list[int] = []
    real_dup = os.dup

    def dup(fd):
        duplicated.append(real_dup(fd))
        return duplicated[-1]

    class _Writer:
        transport = None

        def get_extra_info(self, name):
            return a if name == "socket" else None

    def refuse(*args, **kwargs):
        raise OSError("no wrapper")

    pw = PartWriter(_Writer(), SendStats(), zero_copy=True)
    monkeypatch.setattr(os, "dup", dup)
    monkeypatch.setattr(socket, "socket", refuse)
    try:
        with pytest.raises(OSError, match="no wrapper"):
            pw._socket_fd()
        assert len(duplicated) == 1
        with pytest.raises(OSError):
            os.fstat(duplicated[0])  # closed
    finally:
        monkeypatch.undo()
        a.close()
        b.close()
