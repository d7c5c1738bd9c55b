"""odradek: broker."""
