"""Security of listeners and node links (issue 29): which settings are secrets, the JAAS text Kafka's listeners
take, and each SASL listener's mechanisms and users, read as Kafka reads them (``listener.name.<l>.<mechanism>.``
before ``listener.name.<l>.`` before the bare name)."""
