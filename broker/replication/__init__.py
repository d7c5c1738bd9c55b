"""The partitions this broker hosts and their replication: the replica manager (Kafka's ReplicaManager), the
leader's view of its followers and its ISR changes, the followers' fetchers, fetch-from-follower replica
selection (KIP-392) and incremental fetch sessions (KIP-227, ``fetch_session``).
"""
