"""Import paths of modules that moved (issue 27: broker/ and cluster/ cut into packages by concern): an old name
still imports, as the very module at its new place (never a second copy), and ``python -m OLD`` runs it.

``ModuleAliases`` is the finder both packages use (broker/moved.py holds broker's table); cluster's own table is
``MOVED`` below, installed by ``cluster/__init__.py``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

# old name -> new name; a package's old name covers its submodules
MOVED: dict[str, str] = {
    # the group coordinator's state machines, beside controller/ and raft/
    "cluster.group_coordinator": "cluster.groups.group_coordinator",
    "cluster.group_classic": "cluster.groups.group_classic",
    "cluster.group_consumer": "cluster.groups.group_consumer",
    "cluster.group_config": "cluster.groups.group_config",
    "cluster.group_records": "cluster.groups.group_records",
    "cluster.group_record_helpers": "cluster.groups.group_record_helpers",
    "cluster.assignors": "cluster.groups.assignors",
    "cluster.offsets": "cluster.groups.offsets",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        """The module ran once, under its new name; importing it by its old name runs nothing again."""

    def get_code(self, fullname: str):
        """For ``python -m OLD``: runpy runs the new module's code as ``__main__``."""
        spec = importlib.util.find_spec(self.target)
        return spec.loader.get_code(self.target)


class ModuleAliases(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` finder answering for the old names under ``package`` only."""

    def __init__(self, package: str, moved: dict[str, str]) -> None:
        self.package = package
        self.moved = moved

    def new_name(self, old: str) -> str | None:
        """The module's name today, or None if ``old`` did not move."""
        parts = old.split(".")
        for n in range(len(parts), 1, -1):
            prefix = ".".join(parts[:n])
            if prefix in self.moved:
                return ".".join([self.moved[prefix], *parts[n:]])
        return None

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith(self.package + "."):
            return None
        target_name = self.new_name(fullname)
        if target_name is None:
            return None
        real = importlib.util.find_spec(target_name)
        if real is None:
            return None
        is_package = real.submodule_search_locations is not None
        spec = importlib.machinery.ModuleSpec(fullname, _Alias(target_name), origin=real.origin, is_package=is_package)
        if is_package:
            spec.submodule_search_locations = list(real.submodule_search_locations)
        return spec

    def install(self) -> None:
        if not any(isinstance(f, ModuleAliases) and f.package == self.package for f in sys.meta_path):
            sys.meta_path.insert(0, self)


ALIASES = ModuleAliases("cluster", MOVED)
new_name = ALIASES.new_name


def install() -> None:
    ALIASES.install()
