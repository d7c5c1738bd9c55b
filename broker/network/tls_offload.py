"""TLS of client connections with the record work on network threads (Kafka's ``num.network.threads``), beside
the event loop.

uvloop's (and asyncio's) TLS transport decrypts and encrypts on the event loop: with librdkafka's small TLS records
that is about 1.1 CPU-s per GB produced on the loop's one thread (OpenSSL's work per record, AES-GCM, the memory-BIO
copies), more than the rest of the produce path. Here a connection's TLS is an ``asyncio.Protocol`` over the plain
TCP transport, and the app (KafkaConnection) sees it as its transport:

* the handshake runs on the loop (as before), bounded by ``handshake_timeout``; ``handshake`` is a future the server
  awaits (an ``ssl.SSLError`` for a bad ClientHello or certificate, ConnectionAbortedError at the timeout,
  ConnectionResetError for a peer gone);
* then every use of the connection's ``SSLObject`` is a job run by :class:`TlsWorkers`, a connection's jobs in
  order and one at a time: ciphertext read from the socket is decrypted with ``_tls_records.read_into`` (all whole
  records at once, without the GIL) straight into the app's ``get_buffer()`` (one buffer lent at a time, so a
  produce request still lands in its frame in place), responses are encrypted with ``SSLObject.write`` (256 KiB
  pieces: the GIL is released for each), ``close()`` sends close_notify after what was written;
* results come back to the loop with ``call_soon_threadsafe``, in order; ``buffer_updated``, ``eof_received``,
  ``pause_writing``/``resume_writing`` and ``connection_lost`` are called on the loop.

Bounds: ciphertext waiting for a worker past ``READ_QUEUE_MAX`` stops reading the socket; plaintext waiting to be
encrypted past the write high-water mark (or a full socket buffer) pauses the app's writing. When the app pauses
reading, a finished decryption is held and given on resume. Without the compiled helper (or with
``ODRADEK_TLS_ON_LOOP=1``) :func:`available` is False and the server keeps the loop's own TLS transport."""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import queue
import ssl
import threading

try:
    from broker.network._tls_records import check as _check, read_into as _read_into
except ImportError:  # not compiled: the event loop's TLS transport serves
    _check = _read_into = None

log = logging.getLogger("odradek.tls")

READ_QUEUE_MAX = 1024 * 1024  # ciphertext bytes waiting for decryption before the socket is no longer read
WRITE_HIGH, WRITE_LOW = 64 * 1024, 16 * 1024  # plaintext waiting for encryption (asyncio's default marks)

_HANDSHAKE, _OPEN, _CLOSING, _CLOSED = range(4)
_READ, _WRITE, _CLOSE, _ERROR = range(4)
_WANT_READ, _ZERO_RETURN = ssl.SSL_ERROR_WANT_READ, ssl.SSL_ERROR_ZERO_RETURN


def available() -> bool:
    """The compiled helper is there and works with this Python's ``ssl``, and no one asked for the loop's TLS."""
    if _read_into is None or os.environ.get("ODRADEK_TLS_ON_LOOP", "") not in ("", "0"):
        return False
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO())
    try:
        _check(probe._sslobj)
    except TypeError as exc:
        log.warning("TLS stays on the event loop: %s", exc)
        return False
    return True


class TlsWorkers:
    """``threads`` daemon threads (started at the first job) running connections' TLS jobs. A connection is queued
    when it has jobs and is not queued already, so its jobs run in order on one thread at a time."""

    def __init__(self, threads: int) -> None:
        self.size = max(1, threads)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def schedule(self, connection: "OffloadedTls") -> None:
        if not self._threads:
            with self._lock:
                while len(self._threads) < self.size:
                    t = threading.Thread(target=self._run, name=f"odradek-network-{len(self._threads)}",
                                         daemon=True)
                    t.start()
                    self._threads.append(t)
        self._queue.put(connection)

    def _run(self) -> None:
        while True:
            connection = self._queue.get()
            if connection is None:
                return
            connection.run_jobs()

    def close(self) -> None:
        """Stop the threads once the jobs queued before have run (a later job starts new ones)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(None)
        for t in threads:
            t.join(timeout=5)


class OffloadedTls(asyncio.Protocol):
    """The server side of one TLS connection: a protocol to the TCP transport, a transport to ``app`` (a
    BufferedProtocol, made only once the handshake succeeded)."""

    def __init__(self, app: asyncio.BufferedProtocol, context: ssl.SSLContext, handshake_timeout: float,
                 workers: TlsWorkers, loop: asyncio.AbstractEventLoop) -> None:
        self._app = app
        self._context = context
        self._workers = workers
        self._loop = loop
        self._timeout_s = handshake_timeout
        self.handshake: asyncio.Future = loop.create_future()
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._c = self._ssl._sslobj
        self._raw: asyncio.Transport | None = None
        self._state = _HANDSHAKE
        self._timer: asyncio.TimerHandle | None = None
        self._app_made = self._app_lost = False
        # jobs: appended on the loop, run by a worker
        self._jobs: collections.deque = collections.deque()
        self._jobs_lock = threading.Lock()
        self._scheduled = False
        # reading
        self._ciphertext: list = []
        self._ciphertext_bytes = 0
        self._raw_reading_paused = False
        self._decrypting = False  # a read job holds the app's buffer
        self._more = False  # the last read job filled its buffer: plaintext may be waiting
        self._paused = False  # the app's pause_reading
        self._held = 0  # bytes decrypted into the app's buffer while it was paused
        self._eof = self._eof_told = False
        # writing
        self._encrypting = 0  # plaintext bytes in write jobs
        self._high, self._low = WRITE_HIGH, WRITE_LOW
        self._raw_writing_paused = False
        self._app_writing_paused = False

    # ---- the TCP transport's protocol ----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self._raw = transport
        self._timer = self._loop.call_later(self._timeout_s, self._handshake_timed_out)

    def data_received(self, data: bytes) -> None:
        if self._state == _HANDSHAKE:
            self._incoming.write(data)
            self._handshake_step()
        elif self._state == _OPEN:
            self._ciphertext.append(data)
            self._ciphertext_bytes += len(data)
            if self._ciphertext_bytes > READ_QUEUE_MAX and not self._raw_reading_paused:
                self._raw_reading_paused = True
                self._raw.pause_reading()
            self._pump()

    def eof_received(self) -> bool:
        if self._state == _HANDSHAKE:
            self._fail_handshake(ConnectionResetError("the peer closed the connection during the TLS handshake"))
            return False
        self._eof = True
        self._pump()
        return True  # closed here once what came before the EOF has been given to the app

    def connection_lost(self, exc: Exception | None) -> None:
        handshaking = self._state == _HANDSHAKE
        self._state = _CLOSED
        self._cancel_timer()
        if handshaking:
            self._fail_handshake(exc or ConnectionResetError("the connection was lost during the TLS handshake"))
        elif self._app_made and not self._app_lost:
            self._app_lost = True
            self._app.connection_lost(exc)

    def pause_writing(self) -> None:
        self._raw_writing_paused = True
        self._writing_flow()

    def resume_writing(self) -> None:
        self._raw_writing_paused = False
        self._writing_flow()

    # ---- the handshake (on the loop) -------------------------------------------------------------------------

    def _handshake_step(self) -> None:
        try:
            self._ssl.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except (OSError, ValueError) as exc:  # ssl.SSLError, CertificateError
            self._flush()  # the alert, if any
            self._fail_handshake(exc)
            return
        self._flush()  # the server's last flight and session tickets
        self._cancel_timer()
        self._state = _OPEN
        if not self.handshake.done():
            self.handshake.set_result(None)
        self._app_made = True
        self._app.connection_made(self)
        self._more = True  # the client's first records may have come with its Finished
        self._pump()

    def _handshake_timed_out(self) -> None:
        self._timer = None
        if self._state == _HANDSHAKE:
            self._fail_handshake(ConnectionAbortedError(
                f"the TLS handshake took longer than {self._timeout_s:g} seconds: the connection is aborted"))
            if self._raw is not None:
                self._raw.abort()

    def _fail_handshake(self, exc: BaseException) -> None:
        self._state = _CLOSED
        self._cancel_timer()
        if not self.handshake.done():
            self.handshake.set_exception(exc)
        if self._raw is not None and not self._raw.is_closing():
            self._raw.close()  # after the alert written

    def abort_handshake(self) -> None:
        """The server gave up on this connection before it was made (shutdown): close it, quietly."""
        if not self.handshake.done():
            self.handshake.cancel()
        if self._state == _HANDSHAKE:
            self._state = _CLOSED
            self._cancel_timer()
        if self._raw is not None:
            self._raw.abort()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _flush(self) -> None:
        if self._outgoing.pending:
            data = self._outgoing.read()
            if self._raw is not None and not self._raw.is_closing():
                self._raw.write(data)

    # ---- jobs --------------------------------------------------------------------------------------------------

    def _submit(self, job: tuple) -> None:
        with self._jobs_lock:
            self._jobs.append(job)
            if self._scheduled:
                return
            self._scheduled = True
        self._workers.schedule(self)

    def run_jobs(self) -> None:
        """On a worker: the jobs queued, in order; their results go to the loop, in order, before another worker
        may take this connection."""
        while True:
            with self._jobs_lock:
                if not self._jobs:
                    self._scheduled = False
                    return
                jobs = list(self._jobs)
                self._jobs.clear()
            results = [self._execute(job) for job in jobs]
            try:
                self._loop.call_soon_threadsafe(self._results, results)
            except RuntimeError:  # the loop is closed: nobody is left to answer
                with self._jobs_lock:
                    self._jobs.clear()
                    self._scheduled = False
                return

    def _execute(self, job: tuple) -> tuple:
        kind = job[0]
        try:
            if kind == _READ:
                _, data, buf = job
                n, status, reason, used = _read_into(self._c, data, buf)
                return (_READ, buf, n, status, reason, self._outgoing.read() if self._outgoing.pending else b"",
                        data[used:])
            if kind == _WRITE:
                data = job[1]
                self._c.write(data)
                return _WRITE, len(data), self._outgoing.read()
            try:  # _CLOSE
                self._c.shutdown()
            except ssl.SSLError:  # SSLWantReadError: our close_notify is out, the peer's is not awaited
                pass
            return _CLOSE, self._outgoing.read()
        except Exception as exc:  # noqa: BLE001 - the loop closes the connection
            return _ERROR, exc, job[2] if kind == _READ else None

    def _results(self, results: list) -> None:
        for result in results:
            kind = result[0]
            if kind == _READ:
                _, buf, n, status, reason, out, left = result
                self._decrypting = False
                if left:  # ciphertext the buffer had no room for: first in line again
                    self._ciphertext[:0] = left
                    self._ciphertext_bytes += sum(map(len, left))
                buf.release()  # the app's view, released before buffer_updated as the loop's transports do
                if self._state == _CLOSED:
                    continue
                if out:
                    self._write_raw(out)
                if n and self._state == _OPEN:
                    if self._paused:
                        self._held = n
                    else:
                        self._give(n)
                if status == 0:
                    self._more = True
                elif status == _ZERO_RETURN:
                    self._eof = True
                elif status != _WANT_READ:
                    self._fatal(ssl.SSLError(status, reason or "TLS record error"))
            elif kind == _WRITE:
                self._encrypting -= result[1]
                self._write_raw(result[2])
                self._writing_flow()
            elif kind == _CLOSE:
                self._write_raw(result[1])
                if self._raw is not None and not self._raw.is_closing():
                    self._raw.close()
            else:
                if result[2] is not None:
                    self._decrypting = False
                    result[2].release()
                self._fatal(result[1])
        self._pump()

    def _write_raw(self, data: bytes) -> None:
        if data and self._state != _CLOSED and self._raw is not None and not self._raw.is_closing():
            self._raw.write(data)

    def _fatal(self, exc: BaseException) -> None:
        if self._state != _CLOSED:
            log.info("closing a TLS connection from %s: %r", self.get_extra_info("peername"), exc)
            self.abort()

    # ---- reading into the app ---------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Lend the app's buffer to a read job if there is ciphertext (or plaintext left), else tell it of the
        EOF once everything before it was given."""
        if self._state != _OPEN or self._decrypting or self._paused or self._held:
            return
        if self._ciphertext or self._more:
            try:
                buf = memoryview(self._app.get_buffer(-1))
            except Exception as exc:  # noqa: BLE001 - as the loop's transports: the connection is closed
                self._fatal(exc)
                return
            if not len(buf):
                self._fatal(RuntimeError("get_buffer() returned an empty buffer"))
                return
            data, self._ciphertext, self._ciphertext_bytes = self._ciphertext, [], 0
            self._decrypting = True
            self._more = False
            self._submit((_READ, data, buf))
            if self._raw_reading_paused:
                self._raw_reading_paused = False
                self._raw.resume_reading()
        elif self._eof and not self._eof_told:
            self._eof_told = True
            if not self._app.eof_received():
                self.close()

    def _give(self, n: int) -> None:
        try:
            self._app.buffer_updated(n)
        except Exception as exc:  # noqa: BLE001
            log.exception("closing a TLS connection after an error in its protocol")
            self._fatal(exc)

    # ---- the transport the app sees ----------------------------------------------------------------------------

    def get_extra_info(self, name: str, default=None):
        if name == "sslcontext":
            return self._context
        if name == "ssl_object":
            return self._ssl
        if name == "peercert":
            return self._ssl.getpeercert()
        if name == "cipher":
            return self._ssl.cipher()
        if name == "compression":
            return self._ssl.compression()
        return self._raw.get_extra_info(name, default) if self._raw is not None else default

    def is_closing(self) -> bool:
        return self._state != _OPEN

    def is_reading(self) -> bool:
        return self._state == _OPEN and not self._paused

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self) -> None:
        if self._paused:
            self._paused = False
            self._loop.call_soon(self._resumed)

    def _resumed(self) -> None:
        if self._paused or self._state != _OPEN:
            return
        if self._held:
            n, self._held = self._held, 0
            self._give(n)
        self._pump()

    def write(self, data) -> None:
        if self._state != _OPEN or not len(data):
            return
        self._encrypting += len(data)
        self._submit((_WRITE, data))
        self._writing_flow()

    def writelines(self, list_of_data) -> None:
        for data in list_of_data:
            self.write(data)

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return self._encrypting + (self._raw.get_write_buffer_size() if self._raw is not None else 0)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = WRITE_HIGH if high is None else high
        self._low = min(self._high, self._high // 4 if low is None else low)
        self._writing_flow()

    def _writing_flow(self) -> None:
        if self._state != _OPEN or not self._app_made:
            return
        if not self._app_writing_paused:
            if self._encrypting > self._high or self._raw_writing_paused:
                self._app_writing_paused = True
                self._app.pause_writing()
        elif self._encrypting <= self._low and not self._raw_writing_paused:
            self._app_writing_paused = False
            self._app.resume_writing()

    def close(self) -> None:
        """close_notify after what was written, then the socket closes once its buffer is out."""
        if self._state == _OPEN:
            self._state = _CLOSING
            self._submit((_CLOSE,))

    def abort(self) -> None:
        if self._state == _CLOSED:
            return
        self._state = _CLOSED
        self._cancel_timer()
        if self._raw is not None:
            self._raw.abort()  # connection_lost follows, and tells the app
        elif self._app_made and not self._app_lost:
            self._app_lost = True
            self._app.connection_lost(None)
