"""odradek's pure state machines: the controller (``controller/``), the Raft core (``raft/``), the group
coordinator (``groups/``), client-metrics subscriptions, the metadata image and its records."""

from cluster import moved as _moved

_moved.install()  # the old import paths of modules that moved (cluster/moved.py)
