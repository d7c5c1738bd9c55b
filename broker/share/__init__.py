"""Share groups (KIP-932) on the broker: the share coordinator's runtime, the persister client, share fetch."""
