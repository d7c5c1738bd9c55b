"""Hypothesis strategies for any generated message at any version, built from the schema model.

Only fields present at the version get random values (absent ones keep their defaults), so an
encode/decode round trip must give back an equal object.
"""

from __future__ import annotations

import importlib

from hypothesis import strategies as st

from protocol.codegen.emit import module_name
from protocol.codegen.generate import DEFAULT_SPEC, PACKAGES
from protocol.codegen.schema import Field, Message, Struct, load_all

_LOADED = None


def all_messages() -> list[tuple[str, Message]]:
    global _LOADED
    if _LOADED is None:
        _LOADED = load_all(DEFAULT_SPEC)
    return [(folder, m) for folder, msgs in _LOADED.items() for m in msgs]


def message_class(folder: str, msg: Message) -> type:
    mod = importlib.import_module(f"protocol.generated.{PACKAGES[folder]}.{module_name(msg)}")
    return getattr(mod, msg.name)


_INTS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def _scalar(f: Field, msg: Message, version: int, module) -> st.SearchStrategy:
    t = f.type
    if f.struct is not None:
        return struct_strategy(f.struct, msg, version, module)
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "uuid":
        return st.binary(min_size=16, max_size=16)
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(t)


def field_strategy(f: Field, msg: Message, version: int, module) -> st.SearchStrategy:
    if f.is_array:
        s = st.lists(_scalar(f, msg, version, module), max_size=3)
    else:
        s = _scalar(f, msg, version, module)
    if version in f.nullable:
        s = st.none() | s
    return s


def struct_strategy(struct: Struct, msg: Message, version: int, module) -> st.SearchStrategy:
    cls = getattr(module, struct.name)
    flexible = msg.flexible(version)
    fields = [f for f in struct.fields if version in f.versions]
    kwargs = {f.attr: field_strategy(f, msg, version, module) for f in fields}
    if flexible:
        used = {f.tag for f in fields if version in f.tagged}
        unknown = st.lists(
            st.tuples(st.integers(0, 40).filter(lambda t: t not in used), st.binary(max_size=6)),
            max_size=2, unique_by=lambda x: x[0],
        ).map(lambda xs: sorted(xs) or None)
        kwargs["unknown_tagged_fields"] = unknown
    return st.builds(cls, **kwargs)


def message_strategy(folder: str, msg: Message, version: int) -> st.SearchStrategy:
    cls = message_class(folder, msg)
    module = importlib.import_module(cls.__module__)
    return struct_strategy(msg.per_version[version].root, msg, version, module)
