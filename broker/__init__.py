"""odradek's broker: the asyncio server wiring protocol/, storage/ and cluster/ together.

``from broker import EmbeddedBroker`` gives an in-process broker for test suites.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.testing.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]


def __getattr__(name: str):
    if name == "EmbeddedBroker":
        from broker.testing.embedded import EmbeddedBroker

        return EmbeddedBroker
    raise AttributeError(name)


from broker import moved as _moved  # noqa: E402 - the old import paths (broker.embedded, ...) before anything imports them

_moved.install()
