"""The share-group codec (Kafka 4.2, ``protocol/codegen/kafka-4.2``) against the ``kio`` package.

kio ships types generated per version from Kafka's own schemas. For every served version of every share API
(76-79, 83-87, 90-92), request and response, a sample with a distinct value in every field is encoded by
odradek, read by kio, compared field by field (kio has exactly the fields the schema has at that version, in
the same order), written again by kio and compared byte for byte; kio's bytes decode back to the sample.
A second sample uses nulls and empty arrays where the schema allows them.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import itertools
import uuid

import kio.serial as kio_serial  # a test dependency (pyproject [test]), pinned: kio 0.6.5 has Kafka 4.2's versions
import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from protocol.codegen.emit import module_name
from protocol.codegen.schema import Struct, snake
from protocol.generated.api_keys import APIS
from tests.protocol.schema_strategies import all_messages

# Kafka 4.2's ranges (issue 30): 76 v1, 77 v1, 78 v1-2, 79 v1-2, 83 v0, 84 v0, 85 v0-1, 86 v0, 87 v0-1,
# 90 v0-1, 91 v0, 92 v0
SERVED_4_2 = {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0),
              87: (0, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0)}
_MESSAGES = {(m.api_key, m.kind): m for folder, m in all_messages() if folder == "message" and m.api_key is not None}
_VALID_ERRORS = [133, 122, 123, 124, 121, 3, 6, 16, 69]  # codes kio's ErrorCode knows, one per field in turn

CASES = [pytest.param(key, kind, v, id=f"{APIS[key].name}{kind.title()}-v{v}")
         for key, (lo, hi) in SERVED_4_2.items() for v in range(lo, hi + 1) for kind in ("request", "response")]


def test_api_table_serves_kafka_4_2_ranges():
    """The generated ApiSpec has Kafka 4.2's ranges; the codec has no share version outside them."""
    for key, (lo, hi) in SERVED_4_2.items():
        spec = APIS[key]
        assert (spec.served_min, spec.served_max, spec.stable_max) == (lo, hi, hi), spec.name
        assert (spec.min_version, spec.max_version) == (lo, hi), spec.name
        assert spec.flexible_min <= lo, spec.name  # every share version is flexible


def test_share_apis_are_advertised_only_with_their_handlers():
    """ApiVersions lists a share API only where a handler serves it (the registry advertises handlers only), at
    Kafka 4.2's versions: the share coordinator's inter-broker RPCs (83-87) on the broker listener, never on the
    controller's."""
    from broker.apis import HANDLERS
    from broker.controlplane.controller_apis import CONTROLLER_HANDLERS
    from broker.controlplane.controller_listener import CONTROLLER_LISTENER_HANDLERS
    from broker.network.registry import advertised
    for table in (HANDLERS, CONTROLLER_HANDLERS, CONTROLLER_LISTENER_HANDLERS):
        listed = {k: (lo, hi) for k, lo, hi in advertised(table) if k in SERVED_4_2}
        assert listed == {k: SERVED_4_2[k] for k in listed}
        assert set(listed) == {k for k in table if k in SERVED_4_2}
    assert {83, 84, 85, 86, 87} <= {k for k, _, _ in advertised(HANDLERS)}
    assert not {83, 84, 85, 86, 87} & {k for k, _, _ in advertised(CONTROLLER_LISTENER_HANDLERS)}


def _kio_class(key: int, kind: str, version: int, name: str) -> type:
    mod = importlib.import_module(f"kio.schema.{snake(APIS[key].name)}.v{version}.{kind}")
    return getattr(mod, name)


def _our_module(msg):
    return importlib.import_module(f"protocol.generated.messages.{module_name(msg)}")


class _Values:
    """Distinct values: every field of a sample gets its own number."""

    def __init__(self) -> None:
        self.n = itertools.count(1)
        self.errors = itertools.cycle(_VALID_ERRORS)


def _kio_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def _kio_name(attr: str, kio_fields: dict) -> str:
    """kio names an int32 '...Ms' field as a timedelta without the suffix (throttle_time_ms -> throttle_time)."""
    if attr in kio_fields:
        return attr
    assert attr.endswith("_ms") and attr[:-3] in kio_fields, (attr, list(kio_fields))
    return attr[:-3]


def _sample(struct: Struct, version: int, module, kio_cls: type, vals: _Values, nulls: bool):
    kf = _kio_fields(kio_cls)
    kwargs = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        kfield = kf[_kio_name(f.attr, kf)]
        if nulls and version in f.nullable:
            kwargs[f.attr] = None
            continue
        if f.is_array and nulls:
            kwargs[f.attr] = []
            continue
        n = 2 if f.is_array else 1
        items = [_scalar(f, version, module, kfield, vals, nulls) for _ in range(n)]
        kwargs[f.attr] = items if f.is_array else items[0]
    return getattr(module, struct.name)(**kwargs)


def _elem_type(t):
    args = [a for a in getattr(t, "__args__", ()) if a is not type(None) and a is not Ellipsis]
    return _elem_type(args[0]) if args else t


def _scalar(f, version, module, kfield, vals, nulls):
    if f.struct is not None:
        return _sample(f.struct, version, module, _elem_type(kfield.type), vals, nulls)
    i = next(vals.n)
    if kfield.metadata.get("kafka_type") == "error_code":
        return next(vals.errors)
    return {
        "int8": lambda: i % 100, "int16": lambda: 1000 + i, "int32": lambda: 100_000 + i,
        "int64": lambda: 10_000_000_000 + i, "bool": lambda: True, "string": lambda: f"{f.name}-{i}",
        "uuid": lambda: uuid.UUID(int=i).bytes, "records": lambda: bytes([i % 256]) * 3,
    }[f.type]()


def _norm_kio(v):
    if isinstance(v, datetime.timedelta):
        return round(v.total_seconds() * 1000)
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, KioErrorCode):
        return int(v.value)
    if isinstance(v, bool):
        return v
    return v


def _compare(struct: Struct, version: int, ours, theirs, path: str) -> None:
    """Every field present at ``version`` holds the same value in both; kio has no other field."""
    kf = _kio_fields(type(theirs))
    present = [f for f in struct.fields if version in f.versions]
    assert [_kio_name(f.attr, kf) for f in present] == list(kf), f"{path}: field layout differs from kio"
    for f in present:
        a, b = getattr(ours, f.attr), getattr(theirs, _kio_name(f.attr, kf))
        where = f"{path}.{f.name}"
        if a is None or b is None:
            assert a is None and b is None or (f.type == "uuid" and not any(a or b"")), where
            continue
        if f.is_array:
            assert len(a) == len(b), where
            pairs = zip(a, b)
        else:
            pairs = [(a, b)]
        for x, y in pairs:
            if f.struct is not None:
                _compare(f.struct, version, x, y, where)
            else:
                assert x == _norm_kio(y), f"{where}: {x!r} != {y!r}"


@pytest.mark.parametrize("key,kind,version", CASES)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_share_message_matches_kio(key, kind, version, nulls):
    msg = _MESSAGES[(key, kind)]
    module = _our_module(msg)
    ours_cls = getattr(module, msg.name)
    kio_cls = _kio_class(key, kind, version, msg.name)
    assert kio_cls.__version__ == version and kio_cls.__api_key__ == key and kio_cls.__flexible__

    sample = _sample(msg.per_version[version].root, version, module, kio_cls, _Values(), nulls)
    data = sample.encode(version)
    theirs, size = kio_serial.entity_reader(kio_cls)(data, 0)
    assert size == len(data), "kio read a different length"
    _compare(msg.per_version[version].root, version, sample, theirs, msg.name)

    out = io.BytesIO()
    kio_serial.entity_writer(kio_cls)(out, theirs)
    assert out.getvalue() == data, "kio writes other bytes for the same values"
    assert ours_cls.decode(out.getvalue(), version) == sample
