"""odradek: protocol."""
