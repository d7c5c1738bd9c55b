"""Load Kafka's JSON message schemas into a small typed model the emitter walks.

Kafka's schema files are JSON with ``//`` comment lines. The model keeps only what encoding needs
(names, types, version ranges, tags, defaults); the "about" prose is dropped on purpose.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

PRIMITIVES = frozenset({
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "uuid",
    "string", "bytes", "records",
})

# struct format characters for fixed-width primitives
FIXED_FORMATS = {
    "bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
    "float64": "d", "uuid": "16s",
}
FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "float64": 8,
               "uuid": 16}


def _default_text(value) -> str | None:
    """A schema default as text: booleans lower-cased as in the JSON, None kept."""
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)

INF = 1 << 15


@dataclasses.dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``Versions.NONE`` is empty."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), INF)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def empty(self) -> bool:
        return self.low > self.high


NONE = Versions(0, -1)


def snake(name: str) -> str:
    """CamelCase -> snake_case, keeping acronyms together (``IsrNodes`` -> ``isr_nodes``)."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = s.lower()
    if s in _KEYWORDS:
        s += "_"
    return s


_KEYWORDS = frozenset({
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
    "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not",
    "or", "pass", "raise", "return", "try", "while", "with", "yield", "none", "true", "false",
})


@dataclasses.dataclass
class Field:
    name: str  # Kafka's CamelCase name
    type: str  # element type for arrays, struct name for structs
    is_array: bool
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: str | None
    flexible_override: Versions | None  # field-level flexibleVersions (RequestHeader.ClientId: "none")
    struct: "Struct | None"  # for struct and struct-array fields

    @property
    def attr(self) -> str:
        return snake(self.name)

    @property
    def is_struct(self) -> bool:
        return self.struct is not None


@dataclasses.dataclass
class Struct:
    name: str
    fields: list[Field]


@dataclasses.dataclass
class Schema:
    """One JSON file: a request, response, header or data/record schema."""

    name: str
    kind: str  # request | response | header | data | metadata
    api_key: int | None
    valid: Versions
    flexible: Versions
    latest_unstable: bool
    listeners: list[str]
    root: Struct
    path: Path


def _strip_comments(text: str) -> str:
    return re.sub(r"^\s*//.*$", "", text, flags=re.M)


def load_schema(path: Path) -> Schema:
    raw = json.loads(_strip_comments(path.read_text()))
    common = {c["name"]: c for c in raw.get("commonStructs", [])}

    def build_struct(name: str, field_specs: list[dict]) -> Struct:
        return Struct(name, [build_field(f) for f in field_specs])

    def build_field(spec: dict) -> Field:
        ftype = spec["type"]
        is_array = ftype.startswith("[]")
        elem = ftype[2:] if is_array else ftype
        struct = None
        if elem not in PRIMITIVES:
            if "fields" in spec:
                struct = build_struct(elem, spec["fields"])
            elif elem in common:
                struct = build_struct(elem, common[elem]["fields"])
            else:
                raise ValueError(f"{path.name}: unknown type {elem} for field {spec['name']}")
        tag = spec.get("tag")
        return Field(
            name=spec["name"],
            type=elem,
            is_array=is_array,
            versions=Versions.parse(spec.get("versions")),
            nullable=Versions.parse(spec.get("nullableVersions")),
            tagged=Versions.parse(spec.get("taggedVersions")),
            tag=int(tag) if tag is not None else None,
            default=_default_text(spec.get("default")),
            flexible_override=Versions.parse(spec["flexibleVersions"]) if "flexibleVersions" in spec else None,
            struct=struct,
        )

    return Schema(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=Versions.parse(raw["validVersions"]),
        flexible=Versions.parse(raw.get("flexibleVersions", "none")),
        latest_unstable=bool(raw.get("latestVersionUnstable", False)),
        listeners=list(raw.get("listeners", [])),
        root=build_struct(raw["name"], raw.get("fields", [])),
        path=path,
    )


@dataclasses.dataclass
class Message:
    """A message as served: each version comes from the schema file that defines it.

    ``message-4.1/`` wins for the versions it lists; ``message/`` supplies versions below its minimum
    (the ones KIP-896 removed) so the codec still covers every version Kafka ever released (not a never-stable
    latestVersionUnstable one a newer file dropped: the share APIs' early-access v0).
    """

    name: str
    kind: str
    api_key: int | None
    per_version: dict[int, Schema]
    primary: Schema  # the newest schema: names, flexible range, listeners
    served: Versions  # the range Kafka 4.x's schema lists (message-4.1 where present)

    @property
    def versions(self) -> list[int]:
        return sorted(self.per_version)

    def flexible(self, version: int) -> bool:
        return version in self.per_version[version].flexible

    @property
    def stable_versions(self) -> list[int]:
        out = []
        for v in self.versions:
            s = self.per_version[v]
            if s.latest_unstable and v == s.valid.high:
                continue
            out.append(v)
        return out


def combine(old: Schema | None, new: Schema | None) -> Message:
    primary = new or old
    assert primary is not None
    per_version: dict[int, Schema] = {}
    if new is not None:
        for v in range(new.valid.low, new.valid.high + 1):
            per_version[v] = new
    if old is not None:
        for v in range(old.valid.low, old.valid.high + 1):
            if new is not None and old.latest_unstable and v == old.valid.high:
                continue  # never released: the share APIs' early-access v0, which Kafka 4.1 removed
            if new is None or v < new.valid.low:
                per_version[v] = old
    return Message(primary.name, primary.kind, primary.api_key, per_version, primary, primary.valid)


KAFKA_4_0_DIR = Path(__file__).parent / "kafka-4.0"  # Kafka 4.0 schemas the shared spec lacks (its README)
KAFKA_4_2_DIR = Path(__file__).parent / "kafka-4.2"  # Kafka 4.2's share-group schemas and records (its README)


def load_all(spec_dir: Path) -> dict[str, list[Message]]:
    """Every schema folder, as Messages grouped by folder ('message', 'metadata', ...).

    message/ and message-4.1/ are merged by (api key, kind): 4.1 renamed key 74 (ListClientMetricsResources ->
    ListConfigResources) and covers all its versions, so the old file simply goes unused. kafka-4.0/ and then
    kafka-4.2/ are read after message-4.1/ the same way; kafka-4.2/coordinator/ adds the share-group records.
    """
    out: dict[str, list[Message]] = {}
    old = {}
    for p in sorted((spec_dir / "message").glob("*.json")):
        s = load_schema(p)
        old[(s.api_key, s.kind, s.name if s.api_key is None else "")] = s
    new = {}
    for folder in (spec_dir / "message-4.1", KAFKA_4_0_DIR, KAFKA_4_2_DIR):  # the later folder wins
        for p in sorted(folder.glob("*.json")):
            s = load_schema(p)
            new[(s.api_key, s.kind, s.name if s.api_key is None else "")] = s
    msgs = []
    for key in sorted(set(old) | set(new), key=lambda k: (k[0] if k[0] is not None else 999, k[1], k[2])):
        msgs.append(combine(old.get(key), new.get(key)))
    out["message"] = msgs
    for folder in ("metadata", "coordinator", "raft", "storage"):
        paths = sorted((spec_dir / folder).glob("*.json"))
        if folder == "coordinator":
            paths = sorted(paths + list((KAFKA_4_2_DIR / "coordinator").glob("*.json")), key=lambda p: p.name)
        out[folder] = [combine(load_schema(p), None) for p in paths]
    return out
