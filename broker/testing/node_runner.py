"""``python -m broker.testing.node_runner ARGS``: ``odradek ARGS`` as a node process of
broker/testing/embedded_cluster.py's ``NodeProcess``, dying with the process that started it (``_die_with_parent``). A
module of its own so that the process machinery never imports broker/cli.py (which reaches it through ``dev-cluster
--compose``)."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from broker.testing.embedded_cluster import _die_with_parent

    _die_with_parent()
    from broker.cli import main

    sys.exit(main(sys.argv[1:]))
