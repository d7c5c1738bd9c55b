"""Every message of every schema folder round-trips at every stable version, tagged fields included."""

from __future__ import annotations

import pytest
from hypothesis import given

from tests.protocol.schema_strategies import all_messages, message_class, message_strategy

CASES = [
    pytest.param(folder, msg, v, id=f"{msg.name}-v{v}")
    for folder, msg in all_messages()
    for v in msg.stable_versions
]


@pytest.mark.parametrize("folder,msg,version", CASES)
def test_round_trip(folder, msg, version):
    cls = message_class(folder, msg)

    @given(message_strategy(folder, msg, version))
    def check(obj):
        data = obj.encode(version)
        back = cls.decode(data, version)
        assert back == obj
        assert back.encode(version) == data

    check()


def test_cases_cover_every_api_key():
    kinds: dict[int, set[str]] = {}
    for folder, msg in all_messages():
        if folder == "message" and msg.api_key is not None:
            kinds.setdefault(msg.api_key, set()).add(msg.kind)
    assert len(kinds) == 91  # Kafka 4.2 adds 90-92 (share group offsets)
    assert all(k == {"request", "response"} for k in kinds.values())
    covered = {(c.values[1].name, c.values[2]) for c in CASES}
    for folder, msg in all_messages():
        for v in msg.stable_versions:
            assert (msg.name, v) in covered
