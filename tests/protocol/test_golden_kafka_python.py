"""Golden bytes: kafka-python 3.x's own protocol classes against our generated codec.

kafka-python ships two independent implementations of the wire format, and both are compared here for every
(API, version) they define, discovered by walking their packages rather than hand-picked:

* the schema-driven classes (``kafka.protocol.<area>.*``, subclasses of ``ApiMessage``) with two encode paths:
  the compiled one (``msg.encode(version)``, exec-generated code) and the interpreted one (``_struct.encode``);
* the old hand-written classes (``kafka.protocol.old.*``, ``Request``/``Response`` subclasses with a ``SCHEMA``).

For each pair a value generator walks *their* schema metadata (field list, types, nullability, tags) and builds the
same message twice, once as their object and once as ours, in three modes: ``full`` (every field present, non-default,
non-null, tagged fields set), ``min`` (null wherever nullable, empty arrays and strings, tagged fields left at their
defaults) and ``big`` (extreme integers, strings and bytes longer than 127 bytes so compact lengths take two-byte
varints, primitive arrays of 130+ items). Then:

* their bytes (every path) == our bytes;
* our decode of their bytes == the object we built (field by field, via ``Struct.__eq__``);
* their decode of our bytes == their object (the schema-driven classes only);
* for the schema-driven classes, a whole frame (size + header + body) built by kafka-python's ``with_header`` /
  ``encode(header=True, framed=True)`` equals ours: ``parse_request`` for requests, ``encode_response`` for responses.

Request headers v1/v2 and response headers v0/v1 are compared the same way, against both their header classes.

Versions compared: for the schema-driven classes, the range their JSON declares (``validVersions``; kafka-python also
lets you encode below it by extrapolating the newest schema, which is not a protocol version anyone defines); for the
old classes, the ``API_VERSION`` each class declares.
"""

from __future__ import annotations

import importlib
import io
import pkgutil
import random
import struct
import uuid
import zlib

import kafka.protocol as kp_package
import kafka.protocol.old as kp_old_package
import pytest
from kafka.protocol import api_header as kp_api_header
from kafka.protocol.api_message import ApiMessage as KpApiMessage
from kafka.protocol.old import api as old_api
from kafka.protocol.old import types as OT

from protocol.codegen.schema import snake
from protocol.connection import Request, encode_response, parse_request
from protocol.generated.api_keys import APIS
from tests.protocol.schema_strategies import all_messages, message_class

MODES = ("full", "min", "big")

# ---------------------------------------------------------------------------------------------------------------
# discovery


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _import_all(package, skip=()):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not any(s in info.name for s in skip):
            importlib.import_module(info.name)


_import_all(kp_package, skip=(".old", "generate_stubs"))
_import_all(kp_old_package)

OURS: dict[tuple, tuple] = {}  # (api_key or header name, kind) -> (schema Message, our class)
for _folder, _msg in all_messages():
    if _folder == "message":
        _key = (_msg.api_key if _msg.api_key is not None else _msg.name, _msg.kind)
        OURS[_key] = (_msg, message_class(_folder, _msg))


def _new_cases():
    classes = {c for c in _subclasses(KpApiMessage) if c._class_version is None}
    cases = []
    for cls in sorted(classes, key=lambda c: (c.API_KEY, c.type)):
        msg, ours = OURS[(cls.API_KEY, cls.type)]
        lo, hi = (int(x) for x in (cls.json["validVersions"].split("-") * 2)[:2])
        for v in range(lo, hi + 1):
            assert v in msg.per_version, f"kafka-python has {cls.__name__} v{v}, our codec does not"
            cases.append(pytest.param(cls, v, id=f"{cls.__name__}-v{v}"))
    return cases


# Old classes whose SCHEMA is not the protocol (kafka-python bugs, checked to still fail so a fix is noticed)
_ACLS_V2 = "v2 is flexible in Kafka (flexibleVersions 2+); kafka-python reuses v1's non-flexible SCHEMA"
OLD_KNOWN_BAD = {
    "DescribeLogDirsRequest_v0": "kafka-python declares Partitions as one Int32; Kafka's schema has []int32",
    "DescribeAclsRequest_v2": _ACLS_V2,
    "DescribeAclsResponse_v2": _ACLS_V2,
}


def _old_cases():
    classes = set()
    for base in (old_api.Request, old_api.Response):
        for c in _subclasses(base):
            if isinstance(c.__dict__.get("API_KEY", getattr(c, "API_KEY", None)), int) and isinstance(
                    getattr(c, "API_VERSION", None), int) and isinstance(getattr(c, "SCHEMA", None), OT.Schema):
                classes.add(c)
    cases = []
    for cls in sorted(classes, key=lambda c: (c.API_KEY, c.is_request(), c.API_VERSION, c.__name__)):
        kind = "request" if cls.is_request() else "response"
        msg, _ = OURS[(cls.API_KEY, kind)]
        assert cls.API_VERSION in msg.per_version, f"kafka-python has {cls.__name__}, our codec does not"
        marks = ()
        if cls.__name__ in OLD_KNOWN_BAD:
            marks = pytest.mark.xfail(strict=True, reason="kafka-python bug: " + OLD_KNOWN_BAD[cls.__name__])
        cases.append(pytest.param(cls, id=f"{cls.__name__}@v{cls.API_VERSION}", marks=marks))
    return cases


NEW_CASES = _new_cases()
OLD_CASES = _old_cases()

# ---------------------------------------------------------------------------------------------------------------
# values

ALPHABET = "abcdefxyz-._ 0123456789éßΩ中文🙂"
INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


class Gen:
    """Deterministic values for one mode; ``pair`` returns (their value, our value) for one scalar."""

    def __init__(self, mode: str, seed: str) -> None:
        self.mode = mode
        self.rng = random.Random(zlib.crc32(f"{mode}:{seed}".encode()))

    def count(self, of_structs: bool) -> int:
        if self.mode == "min":
            return 0
        if self.mode == "big":
            return self.rng.randint(1, 2) if of_structs else self.rng.randint(130, 140)
        return self.rng.randint(1, 3)

    def string(self) -> str:
        if self.mode == "min":
            return ""
        n = self.rng.randint(130, 200) if self.mode == "big" else self.rng.randint(1, 10)
        return "".join(self.rng.choice(ALPHABET) for _ in range(n))

    def blob(self) -> bytes:
        if self.mode == "min":
            return b""
        n = self.rng.randint(130, 300) if self.mode == "big" else self.rng.randint(1, 24)
        return self.rng.randbytes(n)

    def integer(self, typ: str, default) -> int:
        lo, hi = INT_RANGES[typ]
        if self.mode == "min":
            return 0
        if self.mode == "big":
            return self.rng.choice([lo, hi, lo + 1, hi - 1] + ([-1] if lo < 0 else []))
        while True:
            v = self.rng.randint(lo, hi) if self.rng.random() < 0.7 else self.rng.randint(max(lo, -300), min(hi, 300))
            if v != default:
                return v

    def scalar(self, typ: str, default):
        """(kafka-python value, our value) for a primitive type name as the JSON schemas spell it."""
        rng = self.rng
        if typ in INT_RANGES:
            v = self.integer(typ, default)
            return v, v
        if typ == "bool":
            v = (not default) if self.mode == "full" else (self.mode == "big")
            return v, v
        if typ == "float64":
            if self.mode == "min":
                v = 0.0
            else:
                v = rng.choice([1.5e300, -2.25e-300]) if self.mode == "big" else rng.uniform(-1e6, 1e6)
            return v, v
        if typ == "uuid":
            b = bytes(16) if self.mode == "min" else rng.randbytes(15) + b"\x01"
            return (None if self.mode == "min" else uuid.UUID(bytes=b)), b
        if typ == "string":
            v = self.string()
            return v, v
        if typ in ("bytes", "records"):
            v = self.blob()
            return v, v
        if typ == "bitfield":  # kafka-python's patched authorized_operations: a set of bit numbers, int32 on the wire
            if self.mode == "min":
                bits = set()
            else:
                bits = {31, 0, 7} if self.mode == "big" else set(rng.sample(range(2, 12), 3))
            mask = sum(1 << b for b in bits)
            return bits, mask - (1 << 32) if mask >= 1 << 31 else mask
        raise AssertionError(f"no generator for type {typ}")


def _kp_default(kfield):
    try:
        return kfield.default
    except Exception:  # noqa: BLE001 - some defaults (struct fields) raise; only scalars use the default
        return None


def _kp_type(kfield) -> str:
    t = kfield.type_str
    return t[2:] if t.startswith("[]") else t


def _ours_for(kp_fields, our_struct, version, where):
    """Pair their fields at ``version`` with ours, by position, checking names and tags agree."""
    ours = [f for f in our_struct.fields if version in f.versions]
    assert len(kp_fields) == len(ours), (
        f"{where} v{version}: kafka-python has {[f.name for f in kp_fields]}, we have {[f.attr for f in ours]}")
    for kf, of in zip(kp_fields, ours):
        assert snake(kf._json["name"]) == of.attr or (kf.name == "authorized_operations" and of.attr.endswith(
            "authorized_operations")), f"{where}: field {kf.name} vs {of.attr}"
        assert kf.tagged_field_q(version) == (version in of.tagged), f"{where}.{of.attr}: tagged-ness differs"
        if kf.tagged_field_q(version):
            assert kf.tag == of.tag, f"{where}.{of.attr}: tag {kf.tag} vs {of.tag}"
    return ours


def build_new(gen: Gen, kp_struct, data_class, our_struct, module, version: int, where: str):
    """Their DataContainer and our Struct with the same field values, walking their StructField at ``version``."""
    kp_fields = [f for f in kp_struct._fields if f.for_version_q(version)]
    ours = _ours_for(kp_fields, our_struct, version, where)
    kp_kw, our_kw = {}, {}
    for kf, of in zip(kp_fields, ours):
        if kf.tagged_field_q(version) and gen.mode == "min":
            continue  # both sides keep their defaults, so both leave the tag out
        nullable = kf.nullable_for_version_q(version)
        assert nullable == (version in of.nullable), f"{where}.{of.attr}: nullability differs at v{version}"
        sub = f"{where}.{of.attr}"
        if nullable and gen.mode == "min":
            kv = ov = None
        elif kf.is_struct_array():
            pairs = [build_new(gen, kf.array_of, kf.data_class, of.struct, module, version, sub)
                     for _ in range(gen.count(of_structs=True))]
            kv, ov = [p[0] for p in pairs], [p[1] for p in pairs]
        elif kf.is_array():
            pairs = [gen.scalar(_kp_type(kf), None) for _ in range(gen.count(of_structs=False))]
            kv, ov = [p[0] for p in pairs], [p[1] for p in pairs]
        elif kf.is_struct():
            default = getattr(module, of.struct.name)()
            for _ in range(20):  # a tagged struct equal to its default is a known divergence; see the test below
                kv, ov = build_new(gen, kf, kf.data_class, of.struct, module, version, sub)
                if not (kf.tagged_field_q(version) and ov == default):
                    break
        else:
            kv, ov = gen.scalar(_kp_type(kf), _kp_default(kf))
        kp_kw[kf.name] = kv
        our_kw[of.attr] = ov
    return data_class(version=version, **kp_kw), getattr(module, our_struct.name)(**our_kw)


# ---------------------------------------------------------------------------------------------------------------
# the schema-driven classes


def _check_new(kcls, version: int, mode: str):
    msg, ours_cls = OURS[(kcls.API_KEY, kcls.type)]
    module = importlib.import_module(ours_cls.__module__)
    gen = Gen(mode, f"{kcls.__name__}-{version}")
    kp_obj, our_obj = build_new(gen, kcls._struct, kcls, msg.per_version[version].root, module, version, kcls.__name__)
    flexible = kcls.flexible_version_q(version)

    compiled = bytes(kp_obj.encode(version=version))
    interpreted = kcls._struct.encode(kp_obj, version=version, compact=flexible, tagged=flexible)
    ours = our_obj.encode(version)
    assert interpreted == compiled, "kafka-python's two encoders disagree (generator bug?)"
    assert ours == compiled

    decoded = ours_cls.decode(compiled, version)
    assert decoded == our_obj
    assert decoded.encode(version) == compiled
    # ...and kafka-python reads our bytes back to its object, through both its decoders
    # (ApiMessage.decode itself: ApiVersionsResponse's override reads any error response as v0, per KIP-511)
    assert KpApiMessage.decode.__func__(kcls, ours, version=version) == kp_obj
    back = kcls._struct.decode(io.BytesIO(ours), version=version, compact=flexible, tagged=flexible,
                               data_class=kcls[None])
    assert back == kp_obj

    spec = APIS[kcls.API_KEY]
    cid = gen.rng.randint(-(1 << 31), (1 << 31) - 1)
    if kcls.is_request():
        client_id = None if mode == "min" else gen.string()
        kp_obj.with_header(correlation_id=cid, client_id=client_id)
        frame = bytes(kp_obj.encode(version=version, header=True, framed=True))
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        req = parse_request(frame[4:])
        assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (
            kcls.API_KEY, version, cid, client_id)
        assert req.header_version == (2 if flexible else 1)
        assert req.decode_body() == our_obj
    else:
        kp_obj.with_header(correlation_id=cid)
        # (no version= here: kafka-python's API_VERSION setter assumes a request header once one is attached)
        frame = bytes(kp_obj.encode(header=True, framed=True))
        req = Request(kcls.API_KEY, version, cid, "golden", spec.request_header_version(version), spec,
                      memoryview(b""), 0)
        assert b"".join(bytes(p) for p in encode_response(req, our_obj)) == frame


@pytest.mark.parametrize("kcls,version", NEW_CASES)
def test_schema_classes(kcls, version):
    for mode in MODES:
        _check_new(kcls, version, mode)


# ---------------------------------------------------------------------------------------------------------------
# the old hand-written classes

# their primitive codec -> the schema type names it can stand for
OLD_TYPES = {
    OT.Int8: {"int8"}, OT.Int16: {"int16", "uint16"}, OT.Int32: {"int32"}, OT.Int64: {"int64"},
    OT.Float64: {"float64"}, OT.Boolean: {"bool"}, OT.UUID: {"uuid"},
    OT.Bytes: {"bytes", "records"}, OT.CompactBytes: {"bytes", "records"}, OT.BitField: {"int32"},
}
UNKNOWN_TAG_BASE = 1000  # far above any tag a schema defines


def _old_kind(t):
    if isinstance(t, OT.CompactString) or t is OT.CompactString:
        return "cstring"
    if isinstance(t, OT.String):
        return "string"
    return t if isinstance(t, type) else type(t)


def _old_flexible(schema: OT.Schema) -> bool:
    return bool(schema.fields) and schema.fields[-1] is OT.TaggedFields


def _old_tags(gen: Gen, our_cls):
    if gen.mode == "min":
        return {}, None
    items = [(UNKNOWN_TAG_BASE + i * 7, gen.rng.randbytes(gen.rng.randint(0, 5 if gen.mode == "full" else 200)))
             for i in range(gen.rng.randint(1, 2))]
    return dict(items), items


def build_old(gen: Gen, schema: OT.Schema, our_struct, module, version: int, where: str):
    """Their positional tuple and our Struct for an old Schema, paired with our fields at ``version`` by position.

    Two shapes of theirs differ from the JSON schemas without changing a byte: a struct with a single field written
    as that field (``Array(String)`` for ``[]MetadataRequestTopic{Name}``), and fields grouped in an inline
    ``Schema`` that the JSON lists flat (CreatePartitions' ``new_partitions``).
    """
    flexible = _old_flexible(schema)
    types = schema.fields[:-1] if flexible else schema.fields
    ours = [f for f in our_struct.fields if version in f.versions and version not in f.tagged]
    kp_vals, our_kw, used = _old_fields(gen, types, ours, 0, module, version, where)
    assert used == len(ours), f"{where} v{version}: kafka-python {list(schema.names)} vs ours {[f.attr for f in ours]}"
    our_cls = getattr(module, our_struct.name)
    if flexible:
        tags, items = _old_tags(gen, our_cls)
        kp_vals.append(tags)
        our_kw["unknown_tagged_fields"] = items
    return tuple(kp_vals), our_cls(**our_kw)


def _old_fields(gen: Gen, types, ours, i: int, module, version: int, where: str):
    kp_vals, our_kw = [], {}
    for t in types:
        if isinstance(t, OT.Schema) and not (i < len(ours) and ours[i].struct is not None and not ours[i].is_array):
            sub_vals, sub_kw, i = _old_fields(gen, t.fields, ours, i, module, version, where)
            kp_vals.append(tuple(sub_vals))
            our_kw.update(sub_kw)
            continue
        assert i < len(ours), f"{where} v{version}: kafka-python has more fields than our {[f.attr for f in ours]}"
        of = ours[i]
        i += 1
        kv, ov = _old_value(gen, t, of, module, version, f"{where}.{of.attr}")
        kp_vals.append(kv)
        our_kw[of.attr] = ov
    return kp_vals, our_kw, i


def _old_value(gen: Gen, t, of, module, version: int, where: str):
    if gen.mode == "min" and version in of.nullable:
        return None, None
    if isinstance(t, OT.Array):
        assert of.is_array, f"{where}: array in kafka-python, {of.type} for us"
        inner = t.array_of
        n = gen.count(of_structs=of.struct is not None)
        if isinstance(inner, OT.Schema):
            assert of.struct is not None, f"{where}: struct array in kafka-python, []{of.type} for us"
            pairs = [build_old(gen, inner, of.struct, module, version, where) for _ in range(n)]
        elif of.struct is not None:  # a one-field struct, written as its field
            (single,) = [f for f in of.struct.fields if version in f.versions]
            assert version not in single.tagged, f"{where}: collapsed struct with a tagged field"
            cls = getattr(module, of.struct.name)
            pairs = []
            for _ in range(n):
                kv, ov = _old_value(gen, inner, single, module, version, f"{where}.{single.attr}")
                pairs.append((kv, cls(**{single.attr: ov})))
        else:
            pairs = [_old_scalar(gen, inner, of, where) for _ in range(n)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(t, OT.Schema):
        assert of.struct is not None and not of.is_array, f"{where}: struct in kafka-python, {of.type} for us"
        return build_old(gen, t, of.struct, module, version, where)
    assert not of.is_array and of.struct is None, f"{where}: scalar {_old_kind(t)} in kafka-python, " + (
        f"[]{of.type}" if of.is_array else of.type) + " for us"
    return _old_scalar(gen, t, of, where)


def _old_scalar(gen: Gen, t, of, where: str):
    kind = _old_kind(t)
    if kind in ("string", "cstring"):
        assert of.type == "string", f"{where}: string in kafka-python, {of.type} for us"
        return gen.scalar("string", None)
    assert of.type in OLD_TYPES.get(kind, ()), f"{where}: {kind} in kafka-python, {of.type} for us"
    if kind is OT.BitField:
        return gen.scalar("bitfield", None)
    if kind is OT.Int16 and of.type == "uint16":
        v = gen.integer("int16", None) & 0x7FFF  # values both an int16 and a uint16 encoder accept
        return v, v
    return gen.scalar(of.type, None)


def _check_old(ocls, mode: str):
    version = ocls.API_VERSION
    kind = "request" if ocls.is_request() else "response"
    msg, ours_cls = OURS[(ocls.API_KEY, kind)]
    module = importlib.import_module(ours_cls.__module__)
    gen = Gen(mode, ocls.__name__)
    vals, our_obj = build_old(gen, ocls.SCHEMA, msg.per_version[version].root, module, version, ocls.__name__)
    theirs = ocls(*vals).encode()
    assert our_obj.encode(version) == theirs
    decoded = ours_cls.decode(theirs, version)
    assert decoded == our_obj
    assert decoded.encode(version) == theirs


@pytest.mark.parametrize("ocls", OLD_CASES)
def test_old_classes(ocls):
    for mode in MODES:
        _check_old(ocls, mode)


# ---------------------------------------------------------------------------------------------------------------
# headers


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("mode", MODES)
def test_request_header(version, mode):
    msg, ours_cls = OURS[("RequestHeader", "header")]
    module = importlib.import_module(ours_cls.__module__)
    gen = Gen(mode, f"RequestHeader-{version}")
    kp_cls = kp_api_header.RequestHeader
    kp_obj, our_obj = build_new(gen, kp_cls._struct, kp_cls, msg.per_version[version].root, module, version,
                                "RequestHeader")
    theirs = kp_obj.encode(flexible=version == 2)
    assert our_obj.encode(version) == theirs
    assert ours_cls.decode(theirs, version) == our_obj
    assert kp_cls.decode(io.BytesIO(our_obj.encode(version)), flexible=version == 2) == kp_obj
    # the old classes: RequestHeader (v1) and RequestHeaderV2 (v2, with tagged fields we don't know)
    old_cls = old_api.RequestHeaderV2 if version == 2 else old_api.RequestHeader
    vals, our_old = build_old(gen, old_cls.SCHEMA, msg.per_version[version].root, module, version, old_cls.__name__)
    theirs = old_cls(*vals).encode()
    assert our_old.encode(version) == theirs
    assert ours_cls.decode(theirs, version) == our_old
    # a whole request through parse_request: header fields, then the body where the header says it starts
    body = b"\x00\x01\x02"
    hdr = old_cls(18, 0, vals[2], vals[3], *vals[4:])
    req = parse_request(hdr.encode() + body)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (18, 0, vals[2], vals[3])
    assert req.header_version == 1  # ApiVersions v0 is not flexible: the header version follows the API, not us
    if version == 2:
        flex = old_cls(18, 3, vals[2], vals[3], *vals[4:])
        req = parse_request(flex.encode() + body)
        assert req.header_version == 2 and bytes(req.body) == body


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("mode", MODES)
def test_response_header(version, mode):
    msg, ours_cls = OURS[("ResponseHeader", "header")]
    module = importlib.import_module(ours_cls.__module__)
    gen = Gen(mode, f"ResponseHeader-{version}")
    kp_cls = kp_api_header.ResponseHeader
    kp_obj, our_obj = build_new(gen, kp_cls._struct, kp_cls, msg.per_version[version].root, module, version,
                                "ResponseHeader")
    theirs = kp_obj.encode(flexible=version == 1)
    assert our_obj.encode(version) == theirs
    assert ours_cls.decode(theirs, version) == our_obj
    old_cls = old_api.ResponseHeaderV2 if version == 1 else old_api.ResponseHeader
    vals, our_old = build_old(gen, old_cls.SCHEMA, msg.per_version[version].root, module, version, old_cls.__name__)
    theirs = old_cls(*vals).encode()
    assert our_old.encode(version) == theirs
    assert ours_cls.decode(theirs, version) == our_old


def test_discovery_counts():
    """Guards the parametrization against silently shrinking (a kafka-python upgrade that moves its classes)."""
    new_pairs = {(c.values[0].API_KEY, c.values[0].type, c.values[1]) for c in NEW_CASES}
    old_pairs = {(c.values[0].API_KEY, c.values[0].is_request(), c.values[0].API_VERSION) for c in OLD_CASES}
    assert len({k for k, _, _ in new_pairs}) >= 50
    assert len(new_pairs) >= 400
    assert len(old_pairs) >= 250


def test_default_tagged_struct_divergence():
    """A tagged struct field equal to its default struct: Kafka's Java writer (and ours) leaves the tag out,
    kafka-python writes it (it only omits None). Both decode either form to the same value."""
    from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse

    from protocol.generated.messages.fetch_response import (EpochEndOffset, FetchableTopicResponse, FetchResponse,
                                                            PartitionData)
    kp = KpFetchResponse(version=12, responses=[KpFetchResponse.FetchableTopicResponse(
        version=12, topic="t", partitions=[KpFetchResponse.FetchableTopicResponse.PartitionData(
            version=12, partition_index=0, records=b"", diverging_epoch=KpFetchResponse.FetchableTopicResponse
            .PartitionData.EpochEndOffset(version=12, epoch=-1, end_offset=-1))])])
    theirs = bytes(kp.encode(version=12))
    ours = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[
        PartitionData(partition_index=0, records=b"", diverging_epoch=EpochEndOffset(epoch=-1, end_offset=-1))])])
    mine = ours.encode(12)
    # theirs carries one more tagged field: tag 0, size 13, int32 epoch, int64 end offset, empty tag section
    assert len(theirs) - len(mine) == 1 + 1 + 13
    assert b"\x01\x00\x0d\xff\xff\xff\xff" + b"\xff" * 8 + b"\x00" in theirs
    assert FetchResponse.decode(theirs, 12) == ours == FetchResponse.decode(mine, 12)
