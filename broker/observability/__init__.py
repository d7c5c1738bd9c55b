"""What the node tells about itself and hears from clients: Prometheus metrics named after Kafka's JMX metrics
(``metrics``) and client telemetry (KIP-714, ``telemetry``).
"""
