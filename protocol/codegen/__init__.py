"""The generator: Kafka's JSON schemas in, checked-in Python codec modules out."""
