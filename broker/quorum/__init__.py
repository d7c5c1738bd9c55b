"""The KRaft quorum's I/O side and the node's metadata: the Raft driver over disk and network (``raft_driver``,
``raft_quorum``, ``kraft_log``, ``state_store``, ``wire``), snapshots, the latest committed image and the parts that
follow it (``metadata_publisher``), and what ``odradek format`` writes: each log directory's ``meta.properties``
(``log_dirs``) and ``bootstrap.checkpoint`` (``bootstrap_metadata``).
"""
