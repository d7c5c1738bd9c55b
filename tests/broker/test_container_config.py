"""The container's environment -> Kafka properties, as Apache Kafka's image maps it (broker/config/container_config.py),
and the checks ``odradek container-run`` makes before it formats or serves."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig, ConfigException
from broker.config.container_config import (
    DEFAULT_SERVER_PROPERTIES, EXCLUDED, KAFKA_DEFAULT_CLUSTER_ID, ContainerConfigError, cluster_id_problem,
    derive_listeners, env_to_property, from_environ, property_to_env, quorum_problem,
)

COMBINED = {
    "CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw",
    "KAFKA_NODE_ID": "1",
    "KAFKA_PROCESS_ROLES": "broker,controller",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
    "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093",
    "KAFKA_LISTENERS": "PLAINTEXT://:19092,CONTROLLER://:9093,PLAINTEXT_HOST://:9092",
    "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
    "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka-1:19092,PLAINTEXT_HOST://localhost:29092",
    "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
    "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
    "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs",
}


@pytest.mark.parametrize("name, key", [
    ("KAFKA_CONTROLLER_QUORUM_VOTERS", "controller.quorum.voters"),
    ("KAFKA_NODE_ID", "node.id"),
    # "_" in a property name is "__", "-" is "___" (KafkaDockerWrapper's replace chain)
    ("KAFKA_LOG_CLEANER_DEDUPE__BUFFER__SIZE", "log.cleaner.dedupe_buffer_size"),
    ("KAFKA_FOO___BAR", "foo-bar"),
    ("KAFKA_A____B", "a-.b"),  # four underscores: "...." -> "-." (the chain replaces "..." first)
    ("KAFKA_A_____B", "a-_b"),
    ("KAFKA_lower_case", "lower.case"),
    # Scala's replace removes every "KAFKA_", not only the prefix
    ("KAFKA_X_KAFKA_Y", "x.y"),
])
def test_variable_names_map_as_kafkas_wrapper(name, key):
    assert env_to_property(name) == key


def test_excluded_and_foreign_variables_are_no_properties():
    for name in EXCLUDED | {"CLUSTER_ID", "PATH", "HOME", "KAFKA", "XKAFKA_NODE_ID"}:
        assert env_to_property(name) is None
    assert EXCLUDED == {"KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
                        "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
                        "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME"}
    cfg = from_environ({**COMBINED, "KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_OPTS": "-Dx=y", "KAFKA_JMX_PORT": "9101"})
    assert not any("heap" in k or k == "opts" for k in cfg.properties)


@pytest.mark.parametrize("key", ["controller.quorum.voters", "log.cleaner.dedupe_buffer_size", "a-b.c_d",
                                 "offsets.topic.replication.factor"])
def test_property_to_env_is_the_inverse(key):
    assert env_to_property(property_to_env(key)) == key


def test_kafkas_combined_example_becomes_a_valid_broker_config():
    cfg = from_environ(COMBINED)
    p = cfg.properties
    assert p["node.id"] == 1 and p["offsets.topic.replication.factor"] == 1  # typed as a properties file
    assert p["controller.quorum.voters"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"  # lists kept whole
    assert "cluster.id" not in p and cfg.cluster_id == "4L6g3nShT-eMCtK--X86sw" and not cfg.cluster_id_defaulted
    BrokerConfig(p).validate()
    assert "node.id=1" in cfg.server_properties.splitlines()


def test_lists_keep_their_items_and_values_are_read_as_a_properties_file():
    cfg = from_environ({**COMBINED, "KAFKA_LOG_DIRS": "/data/a,/data/b", "KAFKA_LOG_RETENTION_MS": "3600000",
                        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false"})
    c = BrokerConfig(cfg.properties)
    assert [str(d) for d in c.log_dirs] == ["/data/a", "/data/b"]
    assert cfg.properties["log.retention.ms"] == 3600000 and cfg.properties["auto.create.topics.enable"] is False
    assert [x.name for x in c.listeners] == ["PLAINTEXT", "CONTROLLER", "PLAINTEXT_HOST"]


def test_unknown_kafka_variables_are_logged_and_ignored():
    cfg = from_environ({**COMBINED, "KAFKA_NUM_NETWORK_THREADS": "3", "KAFKA_NO_SUCH_THING": "x",
                        "KAFKA_SSL_KEYSTORE_FILENAME": "k.jks"})
    assert "num.network.threads" not in cfg.properties and "no.such.thing" not in cfg.properties
    text = "\n".join(cfg.warnings)
    assert "ignoring KAFKA_NO_SUCH_THING (no.such.thing): not a broker config" in text
    assert "ignoring KAFKA_NUM_NETWORK_THREADS (num.network.threads): a Kafka broker config this broker does " \
           "not use" in text
    assert "KAFKA_SSL_KEYSTORE_FILENAME" in text
    assert BrokerConfig(cfg.properties).validate() == []  # nothing unknown reaches the broker


def test_listeners_derived_from_advertised_listeners_with_host_0000():
    env = {k: v for k, v in COMBINED.items() if k != "KAFKA_LISTENERS"}
    env["KAFKA_ADVERTISED_LISTENERS"] = "PLAINTEXT://kafka-1:19092,PLAINTEXT_HOST://localhost:29092"
    assert from_environ(env).properties["listeners"] == "PLAINTEXT://0.0.0.0:19092,PLAINTEXT_HOST://0.0.0.0:29092"
    assert derive_listeners("A://:1,B://h.example:2") == "A://0.0.0.0:1,B://0.0.0.0:2"
    # an empty KAFKA_LISTENERS counts as unset, a given one is kept
    assert from_environ({**env, "KAFKA_LISTENERS": ""}).properties["listeners"].startswith("PLAINTEXT://0.0.0.0")
    assert from_environ({**env, "KAFKA_LISTENERS": "PLAINTEXT://:1"}).properties["listeners"] == "PLAINTEXT://:1"


CONTROLLER = {"CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw", "KAFKA_NODE_ID": "1", "KAFKA_PROCESS_ROLES": "controller",
              "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@c-1:9093,2@c-2:9093,3@c-3:9093",
              "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_LISTENERS": "CONTROLLER://:9093",
              "KAFKA_LOG_DIRS": "/data"}


def test_controller_only_nodes_refuse_advertised_listeners():
    with pytest.raises(ContainerConfigError, match="KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft "
                                                   "controller"):
        from_environ({**CONTROLLER, "KAFKA_ADVERTISED_LISTENERS": "CONTROLLER://c-1:9093"})
    # empty: dropped, as configure unsets it; and no listeners are derived for a controller
    cfg = from_environ({**CONTROLLER, "KAFKA_ADVERTISED_LISTENERS": ""})
    assert "advertised.listeners" not in cfg.properties
    BrokerConfig(cfg.properties).validate()
    with pytest.raises(ContainerConfigError, match="advertised.listeners is not supported"):
        from_environ({k: v for k, v in CONTROLLER.items() if k != "KAFKA_LISTENERS"},
                     "listeners=CONTROLLER://:9093\nadvertised.listeners=CONTROLLER://c:9093\n")


def test_mounted_server_properties_first_variables_win():
    mounted = "node.id=7\nprocess.roles=broker\nlog.dirs=/from/file\ngroup.initial.rebalance.delay.ms=0\n"
    cfg = from_environ({"KAFKA_NODE_ID": "8", "CLUSTER_ID": "x"}, mounted)
    assert cfg.properties["node.id"] == 8 and cfg.properties["log.dirs"] == "/from/file"
    assert cfg.properties["group.initial.rebalance.delay.ms"] == 0


def test_nothing_given_uses_the_images_default_file_and_kafkas_default_cluster_id():
    cfg = from_environ({"PATH": "/bin"})
    assert cfg.server_properties == DEFAULT_SERVER_PROPERTIES
    assert cfg.cluster_id == KAFKA_DEFAULT_CLUSTER_ID == "5L6g3nShT-eMCtK--X86sw" and cfg.cluster_id_defaulted
    assert cfg.properties["log.dirs"] == "/var/lib/kafka/data"
    assert BrokerConfig(cfg.properties).validate() == []
    # a single KAFKA_ variable replaces the whole default file, as in Kafka's image
    assert "controller.quorum.voters" not in from_environ({"KAFKA_NODE_ID": "2"}).properties
    assert from_environ({"CLUSTER_ID": ""}).cluster_id_defaulted  # empty = unset (configureDefaults' -z)


def test_container_arguments_are_exported_first():
    cfg = from_environ(COMBINED, None, ["KAFKA_NODE_ID=3", "CLUSTER_ID=abc"])
    assert cfg.properties["node.id"] == 3 and cfg.cluster_id == "abc"
    with pytest.raises(ContainerConfigError, match="not NAME=value"):
        from_environ(COMBINED, None, ["oops"])


def test_log4j_variables_become_log_levels():
    cfg = from_environ({**COMBINED, "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
                        "KAFKA_LOG4J_LOGGERS": "odradek.raft=DEBUG, odradek.node=ERROR"})
    assert cfg.properties["logger.root"] == "WARN"
    assert cfg.properties["logger.odradek.raft"] == "DEBUG" and cfg.properties["logger.odradek.node"] == "ERROR"


def test_a_quorum_list_that_cannot_name_this_node_is_a_problem():
    assert quorum_problem(from_environ(COMBINED).properties) is None
    wrong = from_environ({**COMBINED, "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka-1:9094,2@kafka-2:9093"})
    assert "lists this node (1) at kafka-1:9094, but its controller listener binds port 9093" in \
        quorum_problem(wrong.properties)
    assert "is not id@host:port" in quorum_problem({**COMBINED, "controller.quorum.voters": "1@kafka-1"})


def test_cluster_id_problems():
    given = from_environ(COMBINED)
    unset = from_environ({k: v for k, v in COMBINED.items() if k != "CLUSTER_ID"})
    assert cluster_id_problem(given, set(), True) is None
    assert cluster_id_problem(given, {"4L6g3nShT-eMCtK--X86sw"}, False) is None
    other = cluster_id_problem(given, {"AAAAAAAAAAAAAAAAAAAAAA"}, False)
    assert "CLUSTER_ID is 4L6g3nShT-eMCtK--X86sw, but the log dirs are formatted for cluster " \
           "AAAAAAAAAAAAAAAAAAAAAA" in other
    # unset on a new volume of a 3-voter quorum: refused; on a formatted one: the volume's id is used
    assert "CLUSTER_ID is not set and the log dirs are not formatted" in cluster_id_problem(unset, set(), True)
    assert cluster_id_problem(unset, {"AAAAAAAAAAAAAAAAAAAAAA"}, False) is None
    # a single node (a quorum of one, Kafka's default file) gets Kafka's default id
    single = from_environ({**COMBINED, "CLUSTER_ID": "", "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@kafka-1:9093"})
    assert cluster_id_problem(single, set(), True) is None


def test_variables_are_parsed_by_their_keys_kafka_type():
    cfg = from_environ({**COMBINED, "KAFKA_NUM_PARTITIONS": " 4 ", "KAFKA_LOG_RETENTION_MS": "60000",
                        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "FALSE", "KAFKA_BROKER_RACK": "1",
                        "KAFKA_INTER_BROKER_LISTENER_NAME": "none", "KAFKA_PROCESS_ROLES": "broker , controller",
                        "KAFKA_LOG_CLEANER_MIN_CLEANABLE_RATIO": "0.25"})
    p = cfg.properties
    assert p["num.partitions"] == 4 and p["log.retention.ms"] == 60000 and p["auto.create.topics.enable"] is False
    assert p["broker.rack"] == "1" and p["inter.broker.listener.name"] == "none"  # STRING keys stay strings
    assert p["process.roles"] == "broker,controller" and p["log.cleaner.min.cleanable.ratio"] == 0.25
    assert p["offsets.topic.replication.factor"] == 1 and p["node.id"] == 1


@pytest.mark.parametrize("name, value", [("KAFKA_NUM_PARTITIONS", "4x"), ("KAFKA_NUM_PARTITIONS", '"4"'),
                                         ("KAFKA_LOG_RETENTION_MS", "\u00a060000"),
                                         ("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "no"), ("KAFKA_NODE_ID", "")])
def test_a_variable_its_type_cannot_parse_is_refused_naming_key_and_value(name, value):
    with pytest.raises(ConfigException, match=f"for configuration {env_to_property(name)}: "):
        from_environ({**COMBINED, name: value})
    with pytest.raises(ConfigException, match="for configuration num.partitions: Not a number of type INT"):
        from_environ({"CLUSTER_ID": "x"}, "node.id=1\nnum.partitions=1_000\n")  # a mounted server.properties


def test_ssl_variables_as_kafkas_image_reads_them_passwords_from_the_credentials_files():
    """configure's SSL step: KAFKA_SSL_*_FILENAME and *_CREDENTIALS name files under /etc/kafka/secrets; the
    credentials files' text is the password; the truststore's two only with client auth."""
    files = {"/etc/kafka/secrets/ks_creds": "ks-pass\n", "/etc/kafka/secrets/key_creds": "key-pass\n",
             "/etc/kafka/secrets/ts_creds": "ts-pass\n"}
    env = {**COMBINED, "KAFKA_ADVERTISED_LISTENERS": "SSL://broker:9093",
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "SSL:SSL,CONTROLLER:PLAINTEXT",
           "KAFKA_SSL_KEYSTORE_FILENAME": "broker.p12", "KAFKA_SSL_KEYSTORE_TYPE": "PKCS12",
           "KAFKA_SSL_KEYSTORE_CREDENTIALS": "ks_creds", "KAFKA_SSL_KEY_CREDENTIALS": "key_creds",
           "KAFKA_SSL_CLIENT_AUTH": "required", "KAFKA_SSL_TRUSTSTORE_FILENAME": "ts.pem",
           "KAFKA_SSL_TRUSTSTORE_CREDENTIALS": "ts_creds"}
    cfg = from_environ(env, read_file=files.__getitem__)
    p = cfg.properties
    assert p["ssl.keystore.location"] == "/etc/kafka/secrets/broker.p12"
    assert (p["ssl.keystore.password"], p["ssl.key.password"], p["ssl.truststore.password"]) == \
        ("ks-pass", "key-pass", "ts-pass")
    assert p["ssl.truststore.location"] == "/etc/kafka/secrets/ts.pem"
    missing = {k: v for k, v in env.items() if k != "KAFKA_SSL_KEY_CREDENTIALS"}
    with pytest.raises(ContainerConfigError, match="KAFKA_SSL_KEY_CREDENTIALS environment variable not set"):
        from_environ(missing, read_file=files.__getitem__)


def test_sasl_listeners_take_their_jaas_entries_from_the_file_kafka_opts_names():
    jaas = """
    KafkaServer {
       org.apache.kafka.common.security.plain.PlainLoginModule required
       username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
       org.apache.kafka.common.security.scram.ScramLoginModule required;
    };
    """
    env = {**COMBINED, "KAFKA_ADVERTISED_LISTENERS": "SASL_PLAINTEXT://broker:9092",
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
           "KAFKA_SASL_ENABLED_MECHANISMS": "PLAIN,SCRAM-SHA-256",
           "KAFKA_OPTS": "-Djava.security.auth.login.config=/etc/kafka/jaas.conf"}
    cfg = from_environ(env, read_file={"/etc/kafka/jaas.conf": jaas}.__getitem__)
    p = cfg.properties
    plain = p["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert plain.startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")
    assert 'user_alice="alice-secret"' in plain
    assert p["listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"] == \
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    from broker.security.sasl_config import listener_sasl
    assert dict(listener_sasl(p, "SASL_PLAINTEXT").plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}
    with pytest.raises(ContainerConfigError, match="KAFKA_OPTS environment variable not set"):
        from_environ({k: v for k, v in env.items() if k != "KAFKA_OPTS"})
