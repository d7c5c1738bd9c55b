"""One connection from this node to another (Kafka's NetworkClient for a single destination).

Requests are pipelined and matched to responses by correlation id; a connection that fails fails every
request in flight on it with ``ConnectionError`` and is opened again by the next request. Used for the
KRaft RPCs between controllers and for a broker's requests to the active controller.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct

from broker.fault_injection import FaultRules
from protocol.framing import FrameReader
from protocol.generated.api_keys import APIS
from protocol.generated.messages import RequestHeader, ResponseHeader
from protocol.message import Message

log = logging.getLogger("odradek.node_client")

MAX_RESPONSE_BYTES = 128 * 1024 * 1024


class NodeClient:
    def __init__(self, host: str, port: int, client_id: str, connect_timeout_s: float = 2.0,
                 peer: int | None = None, faults: FaultRules | None = None) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.peer, self.faults = peer, faults  # the node at the other end; the test-only fault hook
        self.connect_timeout_s = connect_timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._corr = itertools.count(1)
        self._connecting: asyncio.Lock | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"NodeClient({self.host}:{self.port})"

    async def request(self, body: Message, version: int, timeout_s: float) -> Message:
        """Send ``body`` at ``version`` and return the decoded response; ConnectionError or TimeoutError."""
        if self.faults is not None:
            await asyncio.sleep(self.faults.delay_s(self.peer))
            if self.faults.blocks(self.peer):  # lost on a cut link: the caller's timeout is what it sees
                await asyncio.sleep(timeout_s)
                raise asyncio.TimeoutError(f"request to node {self.peer} dropped by the fault hook")
        spec = APIS[body.API_KEY]
        writer = await self._connect()
        corr = next(self._corr) & 0x7FFFFFFF
        header = RequestHeader(body.API_KEY, version, corr, self.client_id)
        payload = header.encode(spec.request_header_version(version)) + body.encode(version)
        fut = asyncio.get_running_loop().create_future()
        self._pending[corr] = (fut, body.API_KEY, version)
        try:
            writer.write(struct.pack(">i", len(payload)) + payload)
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._pending.pop(corr, None)

    async def _connect(self) -> asyncio.StreamWriter:
        if self._closed:
            raise ConnectionError(f"{self} is closed")
        if self._writer is not None and not self._writer.is_closing():
            return self._writer
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port),
                                                        self.connect_timeout_s)
            except (OSError, asyncio.TimeoutError) as exc:
                raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
            self._writer = writer
            self._reader_task = asyncio.ensure_future(self._read(reader, writer))
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(MAX_RESPONSE_BYTES)
        error: BaseException = ConnectionError(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                data = await reader.read(1 << 20)
                if not data:
                    break
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    self._complete(frame)
        except (OSError, ValueError) as exc:
            error = ConnectionError(f"connection to {self.host}:{self.port} failed: {exc}")
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            for fut, _, _ in list(self._pending.values()):
                if not fut.done():
                    fut.set_exception(error)

    def _complete(self, frame) -> None:
        mv = memoryview(frame)
        (corr,) = struct.unpack_from(">i", mv, 0)
        entry = self._pending.get(corr)
        if entry is None:
            return  # answers a request that timed out
        if self.faults is not None and self.faults.blocks(self.peer):
            return  # the link was cut while this request was out: its answer never arrives
        fut, api_key, version = entry
        spec = APIS[api_key]
        try:
            _, pos = ResponseHeader.decode_from(mv, 0, spec.response_header_version(version))
            response = spec.response.decode(mv[pos:], version)
        except Exception as exc:  # noqa: BLE001 - a response we cannot read fails that request only
            if not fut.done():
                fut.set_exception(ConnectionError(f"undecodable {spec.name} response: {exc}"))
            return
        if not fut.done():
            fut.set_result(response)

    async def close(self) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()
            await asyncio.gather(self._reader_task, return_exceptions=True)
