"""odradek: cluster."""
