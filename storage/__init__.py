"""odradek: storage."""
