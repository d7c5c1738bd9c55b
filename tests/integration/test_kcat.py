"""kcat (librdkafka 2.x) against the broker: the topic is auto-created by the first produce, records are
produced under every codec with keys and headers, consumed per partition, and read from an offset and
from a timestamp (``-o s@TS``, ListOffsets by timestamp).

kcat cannot set record timestamps (librdkafka stamps CreateTime) nor report where each record went, so
the partition of every keyed record is checked against librdkafka's partitioner (consistent_random:
CRC32 of the key) and each partition's records against the order they were piped in.
Values are binary; only the two delimiter bytes (0x1e between records, 0x1f between key and value) are
kept out of them. kcat sends the same ``-H`` headers with every record of one run.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from tests.integration.conftest import (
    ALL_CODECS, PARTITIONS, Rec, assert_keys_consistent, assert_stored_codec, crc32_partition, expected_records,
    stored_topic,
)

RS, US = b"\x1e", b"\x1f"


def kcat_records(codec: str) -> list[Rec]:
    recs = expected_records(60, tag=f"kcat-{codec}")
    for r in recs:
        r.value = r.value.replace(RS, b"\x1d").replace(US, b"\x1d")
        r.headers = [("src", b"kcat"), ("codec", codec.encode()), ("empty", b"")]
    return recs


def kcat_produce(kcat: str, bootstrap: str, topic: str, recs: list[Rec], codec: str) -> None:
    data = b"".join((r.key + US if r.key is not None else b"") + r.value + RS for r in recs)
    args = [kcat, "-b", bootstrap, "-P", "-t", topic, "-K", r"\x1f", "-D", r"\x1e", "-z", codec,
            "-X", "linger.ms=20", "-X", "acks=all"]
    for k, v in recs[0].headers:
        args += ["-H", f"{k}={v.decode()}"]
    out = subprocess.run(args, input=data, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode(errors="replace")


_HEAD = re.compile(rb"P(\d+) O(\d+) T(-?\d+) K(-?\d+):")
_VAL = re.compile(rb" V(-?\d+):")


def kcat_consume(kcat: str, bootstrap: str, topic: str, offset: str, partition: int | None = None
                 ) -> dict[int, list[tuple]]:
    """``kcat -C [-p N] -o OFFSET -e`` (all partitions unless ``partition``; OFFSET applies to each):
    {partition: [(offset, key, value, headers, timestamp)]}, parsed by the lengths kcat prints."""
    part = ["-p", str(partition)] if partition is not None else []
    out = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", topic, *part, "-o", offset, "-e",
                          "-X", "fetch.wait.max.ms=50", "-f", r"P%p O%o T%T K%K:%k V%S:%s H%h\x1e"],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    buf, pos, recs = out.stdout, 0, {}
    while pos < len(buf):
        m = _HEAD.match(buf, pos)
        assert m, buf[pos:pos + 80]
        klen = int(m.group(4))
        pos = m.end()
        key = None if klen < 0 else buf[pos:pos + klen]
        pos += max(klen, 0)
        v = _VAL.match(buf, pos)
        assert v, buf[pos:pos + 80]
        vlen = int(v.group(1))
        pos = v.end()
        value = None if vlen < 0 else buf[pos:pos + vlen]
        pos += max(vlen, 0)
        assert buf[pos:pos + 2] == b" H"
        end = buf.index(RS, pos)
        hdr_text = buf[pos + 2:end].decode()
        headers = [(h.split("=", 1)[0], h.split("=", 1)[1].encode()) for h in hdr_text.split(",")] if hdr_text else []
        pos = end + 1
        recs.setdefault(int(m.group(1)), []).append((int(m.group(2)), key, value, headers, int(m.group(3))))
    return recs


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kcat_autocreate_produce_consume_seek(broker, kcat_bin, topic_name, codec):
    topic = topic_name(codec)
    recs = kcat_records(codec)
    kcat_produce(kcat_bin, broker.bootstrap, topic, recs[:30], codec)  # auto-creates the topic
    time.sleep(0.05)  # so the second run's timestamps are later than the first's
    kcat_produce(kcat_bin, broker.bootstrap, topic, recs[30:], codec)

    meta = subprocess.run([kcat_bin, "-b", broker.bootstrap, "-L", "-t", topic], capture_output=True, text=True,
                          timeout=30)
    assert meta.returncode == 0 and f'topic "{topic}" with {PARTITIONS} partitions' in meta.stdout, meta.stdout

    stored = stored_topic(broker.data_dir, topic)
    assert_stored_codec(stored, codec)
    # every record stored exactly once, byte-exact; partitions hold them in the order they were piped in
    where = {}
    for p, sp in stored.items():
        assert [r.offset for r in sp.records] == list(range(len(sp.records)))
        for r in sp.records:
            i = int(r.value.split(b" ")[1])
            assert i not in where, f"record {i} stored twice"
            where[i] = (p, r.offset)
            assert (r.key, r.value, r.headers) == (recs[i].key, recs[i].value, recs[i].headers)
    assert sorted(where) == list(range(len(recs)))
    for p in stored:
        idx = [i for i in sorted(where) if where[i][0] == p]
        assert [where[i][1] for i in idx] == list(range(len(idx)))
    assert_keys_consistent(where, recs, crc32_partition)

    def want(pred) -> dict[int, list[tuple]]:
        out = {p: [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in sp.records if pred(r)]
               for p, sp in stored.items()}
        return {p: v for p, v in out.items() if v}

    assert kcat_consume(kcat_bin, broker.bootstrap, topic, "beginning") == want(lambda r: True)
    one = kcat_consume(kcat_bin, broker.bootstrap, topic, "beginning", partition=1)
    assert one == {p: v for p, v in want(lambda r: True).items() if p == 1}
    # seek by offset (the same absolute offset in every partition)
    mid = min(len(sp.records) for sp in stored.values()) // 2
    assert kcat_consume(kcat_bin, broker.bootstrap, topic, str(mid)) == want(lambda r: r.offset >= mid)
    # seek by timestamp: the first record of the second run
    target = min(r.timestamp for sp in stored.values() for r in sp.records if int(r.value.split(b" ")[1]) >= 30)
    assert all(r.timestamp < target for sp in stored.values() for r in sp.records if int(r.value.split(b" ")[1]) < 30)
    assert kcat_consume(kcat_bin, broker.bootstrap, topic, f"s@{target}") == want(lambda r: r.timestamp >= target)
