"""KRaft's Raft core: pure state machines fed messages, time and randomness (see cluster/raft/*.py)."""
