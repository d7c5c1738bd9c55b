"""A container's configuration from its environment, exactly as Apache Kafka's own image builds it.

Pure: an environment (and the text of a mounted ``server.properties``, if any) in, Kafka properties and
warnings out. ``odradek container-run`` (the image's entry point), ``odradek healthcheck`` and
``odradek dev-cluster --compose`` all derive a node's configuration here, so a compose file written for
``apache/kafka`` ports over by changing the image name.

What Kafka's image does (apache/kafka ``docker/resources/common-scripts/{run,configureDefaults,configure}``,
``docker/jvm/launch`` and ``core/src/main/scala/kafka/docker/KafkaDockerWrapper.scala``), step by step:

1. ``run``: arguments ``NAME=value`` given to the container are exported as environment variables first.
2. ``configureDefaults``: ``CLUSTER_ID`` unset or empty becomes ``5L6g3nShT-eMCtK--X86sw`` (Kafka's default
   cluster id, ``KAFKA_DEFAULT_CLUSTER_ID``).
3. ``configure``: with ``KAFKA_PROCESS_ROLES=controller``, a non-empty ``KAFKA_ADVERTISED_LISTENERS`` is refused
   ("KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller.") and an empty one dropped; then, when
   ``KAFKA_LISTENERS`` is unset or empty, the node is not controller-only and ``KAFKA_ADVERTISED_LISTENERS`` is
   set, ``KAFKA_LISTENERS`` is the advertised listeners with every host replaced by ``0.0.0.0``
   (``sed 's|://[^:]*:|://0.0.0.0:|g'``).
4. ``KafkaDockerWrapper.getServerConfigsFromEnv``: every variable starting with ``KAFKA_`` and not in
   ``EXCLUDED`` becomes a property: ``KAFKA_`` removed (every occurrence: Scala's ``replace``), lower-cased,
   ``_`` -> ``.``, then ``...`` -> ``-``, then ``..`` -> ``_``; so in a variable name ``.`` is ``_``, ``_`` is
   ``__`` and ``-`` is ``___`` (``KAFKA_CONTROLLER_QUORUM_VOTERS`` -> ``controller.quorum.voters``).
5. ``prepareServerConfigs``: ``/mnt/shared/config/server.properties`` if mounted, then one ``key=value`` line per
   variable appended (so a variable wins over the file); when the result is blank, the image's default
   ``server.properties`` (Kafka's ``config/kraft/server.properties``: ``DEFAULT_SERVER_PROPERTIES``) is used
   instead. The file is read as a Java properties file (escapes and all).
6. ``launch``: ``kafka-storage.sh format --cluster-id $CLUSTER_ID`` on the log dirs ("already formatted" is
   fine), then the server starts on the file.

The log4j variables are honoured the odradek way: ``KAFKA_LOG4J_ROOT_LOGLEVEL=WARN`` is ``logger.root: WARN`` and
``KAFKA_LOG4J_LOGGERS='odradek.raft=DEBUG,...'`` one ``logger.<name>: LEVEL`` each (broker/cli.py's log levels).

Where odradek differs, deliberately:

* A variable naming a property this broker does not know (``broker/config/__init__.py``) is logged and ignored
  rather than written into the file (Kafka would log it as "unused" at start).
* ``CLUSTER_ID``: see ``cluster_id_problem``: on an unformatted volume of a node in a multi-voter quorum, an
  unset ``CLUSTER_ID`` is refused instead of silently formatting with the shared default id, and a ``CLUSTER_ID``
  that differs from the one the volume was formatted with stops the node (Kafka ignores the variable then).
* The default file keeps its data in the image's data volume, ``/var/lib/kafka/data`` (Kafka's image declares
  that volume but its default file writes to ``/tmp/kraft-combined-logs``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

KAFKA_DEFAULT_CLUSTER_ID = "5L6g3nShT-eMCtK--X86sw"  # docker/resources/common-scripts/configureDefaults
MOUNTED_CONFIG_DIR = "/mnt/shared/config"  # launch: --mounted-configs-dir
DATA_DIR = "/var/lib/kafka/data"  # the image's data volume

# KafkaDockerWrapper's Constants.ExcludeServerPropsEnv: never server properties
EXCLUDED = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME",
})

# Kafka's config/kraft/server.properties (the image's /etc/kafka/docker/server.properties) without its comments
# and the thread and socket-buffer settings this broker has no use for; log.dirs in the image's data volume
DEFAULT_SERVER_PROPERTIES = f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,\
SASL_SSL:SASL_SSL
socket.request.max.bytes=104857600
log.dirs={DATA_DIR}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


class ContainerConfigError(ValueError):
    """The environment cannot start a node (the message names the variable)."""


@dataclasses.dataclass
class ContainerConfig:
    properties: dict[str, Any]  # parsed by type as broker/config/__init__.py reads a properties file
    server_properties: str  # the final server.properties text, as Kafka's wrapper writes it
    cluster_id: str
    cluster_id_defaulted: bool  # CLUSTER_ID was unset or empty: Kafka's default id
    warnings: list[str]
    environ: dict[str, str]  # the environment after run/configureDefaults/configure


def env_to_property(name: str) -> str | None:
    """``KAFKA_FOO_BAR`` -> ``foo.bar`` as KafkaDockerWrapper maps it; None for a variable it does not map."""
    if not name.startswith("KAFKA_") or name in EXCLUDED:
        return None
    return name.replace("KAFKA_", "").lower().replace("_", ".").replace("...", "-").replace("..", "_")


def property_to_env(key: str) -> str:
    """The inverse: ``.`` -> ``_``, ``_`` -> ``__``, ``-`` -> ``___``, upper-cased, ``KAFKA_`` in front."""
    return "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def derive_listeners(advertised: str) -> str:
    """configure's default ``KAFKA_LISTENERS``: every advertised host replaced by 0.0.0.0."""
    return re.sub(r"://[^:]*:", "://0.0.0.0:", advertised)


def _roles(text: str | None) -> set[str]:
    return {r.strip() for r in str(text or "").split(",") if r.strip()}


def _known_keys() -> set[str]:
    from broker.config import _known_keys as known

    return known()


def _kafka_broker_keys() -> set[str]:
    from broker.config.broker_config_docs import BROKER_CONFIG_DOCS

    return set(BROKER_CONFIG_DOCS)


SECRETS_DIR = "/etc/kafka/secrets"  # configure: where KAFKA_SSL_*_FILENAME and *_CREDENTIALS name files
_JAAS_OPTION = re.compile(r"-Djava\.security\.auth\.login\.config=(\S+)")


def _no_files(path: str) -> str:
    raise ContainerConfigError(f"{path}: no file reader given")


def _tls_from_environ(env: dict[str, str], read_file) -> None:
    """configure's SSL step: an advertised ``SSL://`` listener needs KAFKA_SSL_KEYSTORE_FILENAME and the
    KAFKA_SSL_KEY_CREDENTIALS / KAFKA_SSL_KEYSTORE_CREDENTIALS files (their text is the password), and with
    ssl.client.auth required or requested the truststore's two; all under /etc/kafka/secrets."""
    if "SSL://" not in env.get("KAFKA_ADVERTISED_LISTENERS", ""):
        return

    def need(name: str) -> str:
        if not env.get(name):
            raise ContainerConfigError(f"{name} environment variable not set")
        return f"{SECRETS_DIR}/{env[name]}"

    env["KAFKA_SSL_KEYSTORE_LOCATION"] = need("KAFKA_SSL_KEYSTORE_FILENAME")
    env["KAFKA_SSL_KEY_PASSWORD"] = read_file(need("KAFKA_SSL_KEY_CREDENTIALS")).strip()
    env["KAFKA_SSL_KEYSTORE_PASSWORD"] = read_file(need("KAFKA_SSL_KEYSTORE_CREDENTIALS")).strip()
    auth = env.get("KAFKA_SSL_CLIENT_AUTH", "")
    if "required" in auth or "requested" in auth:
        env["KAFKA_SSL_TRUSTSTORE_LOCATION"] = need("KAFKA_SSL_TRUSTSTORE_FILENAME")
        env["KAFKA_SSL_TRUSTSTORE_PASSWORD"] = read_file(need("KAFKA_SSL_TRUSTSTORE_CREDENTIALS")).strip()


def _jaas_sections(text: str) -> dict[str, str]:
    """A JAAS file's sections: ``Name { entries };`` -> the entries' text."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"([\w.\-]+)\s*\{(.*?)\}\s*;", text, re.S)}


def _sasl_from_environ(env: dict[str, str], props: dict[str, Any], read_file, warnings: list[str]) -> None:
    """configure's SASL step: an advertised ``SASL_*://`` listener needs KAFKA_OPTS with
    ``-Djava.security.auth.login.config=<file>``; the file's ``<listener>.KafkaServer`` (else ``KafkaServer``)
    section gives each SASL listener its mechanisms' JAAS entries, as Kafka's broker reads them."""
    if not re.search(r"SASL_.*://", env.get("KAFKA_ADVERTISED_LISTENERS", "")):
        return
    if not env.get("KAFKA_OPTS"):
        raise ContainerConfigError("KAFKA_OPTS environment variable not set")
    m = _JAAS_OPTION.search(env["KAFKA_OPTS"])
    if m is None:
        warnings.append("KAFKA_OPTS should contain 'java.security.auth.login.config' property.")
        return
    from broker.security.sasl_config import LOGIN_MODULES, parse_jaas

    sections = _jaas_sections(read_file(m.group(1)))
    named = f"{props.get('listeners') or ''},{props.get('advertised.listeners') or ''}"
    listeners = sorted({item.split("://", 1)[0].strip() for item in named.split(",") if "://" in item})
    for listener in listeners:
        section = sections.get(f"{listener.lower()}.KafkaServer") or sections.get("KafkaServer")
        if section is None:
            continue
        for entry in parse_jaas(section):
            for mechanism, module in LOGIN_MODULES.items():
                key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
                if entry.login_module == module and key not in props:
                    options = "".join(f' {k}="{v}"' for k, v in entry.options.items())
                    props[key] = f"{module} {entry.control_flag.lower()}{options};"


def from_environ(environ: Mapping[str, str], mounted_properties: str | None = None,
                 args: list[str] | tuple[str, ...] = (), read_file=_no_files) -> ContainerConfig:
    """A node's configuration from its environment (``args``: ``NAME=value`` container arguments, exported
    first as the image's ``run`` does; ``mounted_properties``: the text of a mounted server.properties;
    ``read_file``: reads the secrets and JAAS files the environment names)."""
    from broker.config import parse_property
    from storage.checkpoints import decode_properties

    env = dict(environ)
    for item in args:  # run: export "$var"
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ContainerConfigError(f"container argument {item!r} is not NAME=value")
        env[name] = value
    warnings: list[str] = []
    defaulted = not env.get("CLUSTER_ID")
    if defaulted:  # configureDefaults
        env["CLUSTER_ID"] = KAFKA_DEFAULT_CLUSTER_ID
        warnings.append(f'CLUSTER_ID not set. Setting it to default value: "{KAFKA_DEFAULT_CLUSTER_ID}"')
    roles = _roles(env.get("KAFKA_PROCESS_ROLES"))
    controller_only = roles == {"controller"}
    if controller_only:  # configure
        if env.get("KAFKA_ADVERTISED_LISTENERS"):
            raise ContainerConfigError("KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller "
                                       "(KAFKA_PROCESS_ROLES=controller): clients never connect to a controller-only "
                                       "node; set KAFKA_LISTENERS only")
        env.pop("KAFKA_ADVERTISED_LISTENERS", None)
    if not env.get("KAFKA_LISTENERS") and not controller_only and env.get("KAFKA_ADVERTISED_LISTENERS"):
        env["KAFKA_LISTENERS"] = derive_listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    _tls_from_environ(env, read_file)
    known, kafka_keys = _known_keys(), _kafka_broker_keys()
    lines = []
    for name in sorted(env):
        key = env_to_property(name)
        if key is None:
            continue
        if key not in known:
            why = "a Kafka broker config this broker does not use" if key in kafka_keys else \
                "not a broker config"
            warnings.append(f"ignoring {name} ({key}): {why}")
            continue
        lines.append(f"{key}={env[name]}")
    # prepareServerConfigs: the mounted file, the variables appended; blank -> the image's default file
    text = (mounted_properties or "") + "".join("\n" + line for line in lines)
    if not text.strip():
        text = DEFAULT_SERVER_PROPERTIES
    # each value parsed by its key's Kafka type (broker/config/config_types.py; ConfigException names key and value)
    props: dict[str, Any] = {k: parse_property(k, v) for k, v in decode_properties(text).items()}
    # log4j variables as odradek's ``logger.<name>: LEVEL`` entries
    if env.get("KAFKA_LOG4J_ROOT_LOGLEVEL"):
        props["logger.root"] = env["KAFKA_LOG4J_ROOT_LOGLEVEL"].strip()
    for item in filter(None, (x.strip() for x in env.get("KAFKA_LOG4J_LOGGERS", "").split(","))):
        logger, sep, level = item.partition("=")
        if not sep:
            warnings.append(f"ignoring {item!r} in KAFKA_LOG4J_LOGGERS: not logger=LEVEL")
            continue
        props[f"logger.{logger.strip()}"] = level.strip()
    _sasl_from_environ(env, props, read_file, warnings)
    if _roles(props.get("process.roles")) == {"controller"} and props.get("advertised.listeners"):
        raise ContainerConfigError("advertised.listeners is not supported on a KRaft controller "
                                   "(process.roles=controller): remove it from the mounted server.properties")
    return ContainerConfig(props, text, env["CLUSTER_ID"], defaulted, warnings, env)


def voters_of(props: Mapping[str, Any]) -> dict[int, tuple[str, int]]:
    from broker.quorum.raft_quorum import parse_voters

    text = props.get("controller.quorum.voters")
    return parse_voters(text) if text else {}


def quorum_problem(props: Mapping[str, Any]) -> str | None:
    """A node's own entry in ``controller.quorum.voters`` that cannot be it: listed at a port none of its
    controller listeners binds (the other voters would send its votes and fetches elsewhere)."""
    from broker.config import parse_listeners

    try:
        voters = voters_of(props)
    except ValueError as exc:
        return str(exc)
    node_id = int(props.get("node.id", 1))
    if node_id not in voters or "controller" not in _roles(props.get("process.roles", "broker,controller")):
        return None
    names = {n.strip() for n in str(props.get("controller.listener.names") or "").split(",") if n.strip()}
    ports = {lst.port for lst in parse_listeners(str(props.get("listeners") or "")) if lst.name in names}
    host, port = voters[node_id]
    if ports and port not in ports:
        return (f"controller.quorum.voters lists this node ({node_id}) at {host}:{port}, but its controller "
                f"listener binds port {', '.join(map(str, sorted(ports)))}: the quorum list is wrong for this node")
    return None


def cluster_id_problem(cfg: ContainerConfig, formatted_ids: set[str], unformatted: bool) -> str | None:
    """Why the log dirs cannot be formatted or used with this ``CLUSTER_ID``, or None.

    ``formatted_ids``: the cluster ids in the log dirs' meta.properties; ``unformatted``: some log dir has none.
    * a ``CLUSTER_ID`` given and a volume formatted for another cluster: refused, naming both;
    * ``CLUSTER_ID`` unset on an unformatted volume of a node in a quorum of more than one voter: refused
      (Kafka would format with its shared default id, and two such clusters would accept each other's nodes);
      a single node (a quorum of one, Kafka's default config) gets Kafka's default id.
    """
    if not cfg.cluster_id_defaulted:
        other = sorted(formatted_ids - {cfg.cluster_id})
        if other:
            return (f"CLUSTER_ID is {cfg.cluster_id}, but the log dirs are formatted for cluster {', '.join(other)}: "
                    f"this volume belongs to another cluster (use that cluster's id, or an empty volume)")
        return None
    if unformatted and not formatted_ids:
        try:
            voters = voters_of(cfg.properties)
        except ValueError:
            voters = {}
        if len(voters) > 1 or cfg.properties.get("controller.quorum.bootstrap.servers"):
            return ("CLUSTER_ID is not set and the log dirs are not formatted: every node of a multi-node cluster "
                    "needs the same CLUSTER_ID to format its volume (e.g. the output of `odradek random-uuid`; "
                    f"Kafka's image would use its default {KAFKA_DEFAULT_CLUSTER_ID})")
    return None
