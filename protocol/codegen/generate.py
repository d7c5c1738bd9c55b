"""Write every generated module: ``python -m protocol.codegen [--spec DIR] [--out DIR]`` (``make generate``).

Output (checked in): ``protocol/generated/<folder>/<message>.py`` for each schema folder, a package
``__init__`` per folder naming every class, and ``protocol/generated/api_keys.py``, the API table.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from protocol.codegen.emit import HEADER, Emitter, module_name
from protocol.codegen.schema import INF, Message, load_all

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SPEC = Path(os.environ.get("ODRADEK_KAFKA_SPEC", REPO.parent / "shared" / "kafka-spec"))
DEFAULT_OUT = REPO / "protocol" / "generated"

FOLDERS = ("message", "metadata", "coordinator", "raft", "storage")
PACKAGES = {"message": "messages", "metadata": "metadata", "coordinator": "coordinator", "raft": "raft",
            "storage": "storage"}


def render(spec_dir: Path) -> dict[str, str]:
    """Relative path -> file text for the whole generated tree."""
    files: dict[str, str] = {}
    loaded = load_all(spec_dir)
    files["__init__.py"] = (HEADER
                            + '"""Code generated from Kafka\'s JSON schemas; regenerate with `make generate`."""\n')
    for folder in FOLDERS:
        pkg = PACKAGES[folder]
        exports = []
        for msg in loaded[folder]:
            mod = module_name(msg)
            files[f"{pkg}/{mod}.py"] = Emitter(msg).emit()
            exports.append((mod, msg.name))
        init = [HEADER]
        for mod, name in exports:
            init.append(f"from protocol.generated.{pkg}.{mod} import {name}")
        init.append("")
        init.append("__all__ = [")
        for _, name in exports:
            init.append(f"    {name!r},")
        init.append("]")
        files[f"{pkg}/__init__.py"] = "\n".join(init) + "\n"
    files["api_keys.py"] = render_api_keys(loaded["message"])
    return files


def render_api_keys(messages: list[Message]) -> str:
    by_key: dict[int, dict[str, Message]] = {}
    for m in messages:
        if m.api_key is not None and m.kind in ("request", "response"):
            by_key.setdefault(m.api_key, {})[m.kind] = m
    out = [HEADER, '"""The API table: every key, its message classes and the versions Kafka defines and serves."""\n',
           "from __future__ import annotations\n",
           "import dataclasses\n"]
    for key in sorted(by_key):
        for kind in ("request", "response"):
            m = by_key[key][kind]
            out.append(f"from protocol.generated.messages.{module_name(m)} import {m.name}")
    out.append('''

@dataclasses.dataclass(frozen=True)
class ApiSpec:
    """One API key as Kafka's schemas define it."""

    key: int
    name: str
    request: type
    response: type
    min_version: int  # the lowest version any schema defines (the codec covers it)
    max_version: int  # the highest version any schema defines
    served_min: int  # Kafka 4.x's range (message-4.1 where present): what a 4.x broker advertises at most
    served_max: int
    stable_max: int  # served_max minus a version marked latestVersionUnstable
    flexible_min: int  # first flexible version; above max_version when none is
    listeners: tuple[str, ...]

    def is_flexible(self, version: int) -> bool:
        return version >= self.flexible_min

    def request_header_version(self, version: int) -> int:
        """Kafka's ApiMessageType.requestHeaderVersion: flexible requests use v2, others v1
        (ControlledShutdown v0 alone uses v0)."""
        if self.key == 7 and version == 0:
            return 0
        return 2 if version >= self.flexible_min else 1

    def response_header_version(self, version: int) -> int:
        """Flexible responses use header v1, except ApiVersions which always uses v0 (KIP-511)."""
        if self.key == 18:
            return 0
        return 1 if version >= self.flexible_min else 0

''')
    out.append("APIS: dict[int, ApiSpec] = {")
    for key in sorted(by_key):
        req = by_key[key]["request"]
        resp = by_key[key]["response"]
        served = req.served
        stable_max = served.high
        if req.primary.latest_unstable:
            stable_max -= 1
        flex = req.primary.flexible.low if req.primary.flexible.high >= INF else 1 << 15
        if req.primary.flexible.low > req.primary.flexible.high:
            flex = 1 << 15
        out.append(f"    {key}: ApiSpec({key}, {req.name[:-len('Request')]!r}, {req.name}, {resp.name}, "
                   f"{req.versions[0]}, {req.versions[-1]}, {served.low}, {served.high}, {stable_max}, {flex}, "
                   f"{tuple(req.primary.listeners)!r}),")
    out.append("}")
    out.append("")
    out.append("BY_NAME: dict[str, ApiSpec] = {spec.name: spec for spec in APIS.values()}")
    return "\n".join(out) + "\n"


def write(files: dict[str, str], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for rel, text in files.items():
        p = out_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        wanted.add(p)
        if not p.exists() or p.read_text() != text:
            p.write_text(text)
    for p in out_dir.rglob("*.py"):
        if p not in wanted:
            p.unlink()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    files = render(args.spec)
    write(files, args.out)
    print(f"wrote {len(files)} modules to {args.out}")


if __name__ == "__main__":
    main()
