"""Test and development tooling built on the product, never imported by a running node (tests/test_layering.py):
the in-process broker (``embedded``), a cluster of node processes (``embedded_cluster``, ``node_runner``), the
pytest fixtures for users' suites (``pytest_plugin``), and ``odradek dev-cluster`` (``dev_cluster``,
``compose_cluster``).
"""
