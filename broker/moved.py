"""Import paths of modules that moved into broker/'s packages (issue 27): ``broker.embedded``, ``broker.server`` and
the rest still import, as the very module at its new place (never a second copy), and ``python -m`` runs them.

A finder on ``sys.meta_path`` (cluster/moved.py's, installed by ``broker/__init__.py``) answers for the old names
only; everything inside odradek imports the new ones (tests/broker/test_moved_modules.py checks both).
"""

from __future__ import annotations

from cluster.moved import ModuleAliases

# old name -> new name; a package's old name covers its submodules (broker.fetch_session.cache)
MOVED = {
    # the network: server, handler table, responses, connections to peers
    "broker.server": "broker.network.server",
    "broker.dispatch": "broker.network.dispatch",
    "broker.registry": "broker.network.registry",
    "broker.sendfile": "broker.network.sendfile",
    "broker.tcp_nodelay": "broker.network.tcp_nodelay",
    "broker.node_client": "broker.network.node_client",
    "broker.blocking_request": "broker.network.blocking_request",
    "broker.peer_links": "broker.network.peer_links",
    "broker.fault_injection": "broker.network.fault_injection",
    # what handlers get, and the produce path's batch checks
    "broker.context": "broker.apis.context",
    "broker.log_validator": "broker.apis.log_validator",
    # the control plane
    "broker.controller_channel": "broker.controlplane.controller_channel",
    "broker.controller_apis": "broker.controlplane.controller_apis",
    "broker.controller_listener": "broker.controlplane.controller_listener",
    # the quorum and the node's metadata
    "broker.metadata_publisher": "broker.quorum.metadata_publisher",
    "broker.bootstrap_metadata": "broker.quorum.bootstrap_metadata",
    "broker.log_dirs": "broker.quorum.log_dirs",
    # partitions and replication
    "broker.replica_manager": "broker.replication.replica_manager",
    "broker.replica_fetcher": "broker.replication.replica_fetcher",
    "broker.replica_selector": "broker.replication.replica_selector",
    "broker.replica_state": "broker.replication.replica_state",
    "broker.isr_sender": "broker.replication.isr_sender",
    "broker.fetch_session": "broker.replication.fetch_session",
    # groups, observability, configuration
    "broker.group_service": "broker.groups.group_service",
    "broker.metrics": "broker.observability.metrics",
    "broker.telemetry": "broker.observability.telemetry",
    "broker.config_types": "broker.config.config_types",
    "broker.container_config": "broker.config.container_config",
    "broker.config_describe": "broker.config.config_describe",
    "broker.alter_configs": "broker.config.alter_configs",
    "broker.broker_config_docs": "broker.config.broker_config_docs",
    "broker.topic_config_docs": "broker.config.topic_config_docs",
    # test and development tooling
    "broker.embedded": "broker.testing.embedded",
    "broker.embedded_cluster": "broker.testing.embedded_cluster",
    "broker.pytest_plugin": "broker.testing.pytest_plugin",
    "broker.node_runner": "broker.testing.node_runner",
    "broker.dev_cluster": "broker.testing.dev_cluster",
    "broker.compose_cluster": "broker.testing.compose_cluster",
}


ALIASES = ModuleAliases("broker", MOVED)
new_name = ALIASES.new_name


def install() -> None:
    ALIASES.install()
