"""The one handler table: API key -> handler module, with Kafka-schema sanity checks.

ApiVersions is generated from this table, so what is advertised is exactly what is registered.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any, Callable

from protocol.generated.api_keys import APIS, ApiSpec


@dataclasses.dataclass(frozen=True)
class Declared:
    """An API a listener answers with a shared function (forward it, run it on the active controller, hand it to
    the Raft driver), declared once with the versions of the module that does the work."""

    API_KEY: int
    VERSIONS: tuple[int, int]
    handle: Callable[..., Any]
    __name__: str  # what it is, for the table's error messages and tests


@dataclasses.dataclass(frozen=True)
class Handler:
    api_key: int
    spec: ApiSpec
    versions: tuple[int, int]  # versions we answer
    advertised: tuple[int, int]  # versions we list in ApiVersions (Produce lists v0, KAFKA-18659)
    handle: Callable[..., Any]
    module: ModuleType | Declared


def build_table(modules: list[ModuleType | Declared], listener: str = "broker") -> dict[int, Handler]:
    """The table for one listener kind (the schema's ``listeners``: "broker" or "controller")."""
    table: dict[int, Handler] = {}
    for mod in modules:
        key = mod.API_KEY
        lo, hi = mod.VERSIONS
        adv = getattr(mod, "ADVERTISED", mod.VERSIONS)
        if key in table:
            raise ValueError(f"api key {key} registered twice ({mod.__name__})")
        spec = APIS.get(key)
        if spec is None:
            raise ValueError(f"{mod.__name__}: api key {key} has no schema")
        if not (0 <= lo <= hi) or not (adv[0] <= lo and hi <= adv[1]):
            raise ValueError(f"{mod.__name__}: bad version range {mod.VERSIONS} / {adv}")
        if not (spec.min_version <= adv[0] and adv[1] <= spec.stable_max):
            raise ValueError(f"{mod.__name__}: {adv} is outside the schema's stable versions")
        if listener not in spec.listeners:
            raise ValueError(f"{mod.__name__}: {spec.name} is not a {listener}-listener API")
        table[key] = Handler(key, spec, (lo, hi), tuple(adv), mod.handle, mod)
    return dict(sorted(table.items()))


def advertised(table: dict[int, Handler]) -> list[tuple[int, int, int]]:
    """(api key, min, max) for every handler: what ApiVersions lists."""
    return [(h.api_key, h.advertised[0], h.advertised[1]) for h in table.values()]
