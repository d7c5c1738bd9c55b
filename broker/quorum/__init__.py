"""The KRaft quorum's I/O side: the quorum-state file, and (next) the Raft driver and its transport."""
