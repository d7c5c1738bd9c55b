"""Share groups (KIP-932): the share coordinator's and the share partitions' state machines."""
