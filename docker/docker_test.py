"""`make docker-test`: build the image and run docker/compose.yaml's cluster for real on this kind of machine.

This machine's adapter (see README, "Docker on this kind of machine"): no image registry is reachable and
dockerd may only run without its default bridge, so this

1. installs docker.io, docker-compose and debootstrap with apt when missing;
2. starts `dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false` (and stops it at the
   end, on failure too), or uses a dockerd that already answers and leaves it running;
3. makes the base image `base:bookworm` with `debootstrap --variant=minbase bookworm` + `docker import`
   when absent (the rootfs is cached under $ODRADEK_DOCKER_CACHE, default /var/tmp/odradek-docker);
4. builds docker/Dockerfile with `docker build --network host`, BASE_IMAGE=base:bookworm and the host's CA
   bundle for pip (copied to docker/ca-bundle.crt for the build only; .gitignore lists it);
5. writes a host-network variant of docker/compose.yaml with docker/compose_host.py (127.0.0.1 only,
   distinct free loopback ports), `docker-compose up -d`, and times `up` -> every container healthy;
6. runs the client check from the host: confluent-kafka creates a topic with replication factor 3,
   confluent-kafka and kcat produce, one node is killed (`docker kill`, the leader of partition 0),
   producing goes on, the node starts again and turns healthy, confluent-kafka and kcat consume everything;
7. `docker-compose down -v`, and prints the image size and the up -> healthy time.

Environment: ODRADEK_COMPOSE_FILE (default docker/compose.yaml), ODRADEK_IMAGE (odradek:docker-test),
ODRADEK_BASE_IMAGE (base:bookworm), ODRADEK_DOCKER_CACHE, ODRADEK_KEEP_UP=1 (leave the cluster running).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPOSE_FILE = os.environ.get("ODRADEK_COMPOSE_FILE", os.path.join(REPO, "docker", "compose.yaml"))
IMAGE = os.environ.get("ODRADEK_IMAGE", "odradek:docker-test")
BASE_IMAGE = os.environ.get("ODRADEK_BASE_IMAGE", "base:bookworm")
CACHE = os.environ.get("ODRADEK_DOCKER_CACHE", "/var/tmp/odradek-docker")
PROJECT = "odradek-docker-test"
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"
CONTEXT_CA = os.path.join(REPO, "docker", "ca-bundle.crt")
# the CLI that ships with dockerd (docker.io) first: a newer CLI elsewhere on PATH may want buildx
DOCKER = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"
HEALTHY_TIMEOUT = 300.0


def log(msg: str) -> None:
    print(f"[docker-test {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(*cmd: str, check: bool = True, capture: bool = False, **kw) -> subprocess.CompletedProcess:
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=check, text=True, capture_output=capture, **kw)


def out(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, text=True, capture_output=True).stdout.strip()


def ensure_packages() -> None:
    need = [pkg for pkg, binary in (("docker.io", "dockerd"), ("docker-compose", "docker-compose"),
                                    ("debootstrap", "debootstrap")) if shutil.which(binary) is None]
    if need:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        run(*sudo, "apt-get", "update", "-qq")
        run(*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", *need)


def docker_answers() -> bool:
    return subprocess.run([DOCKER, "info"], capture_output=True).returncode == 0


class Dockerd:
    """dockerd without its default bridge; started here only if none answers, and then stopped here."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if docker_answers():
            log("using the dockerd that is already running (left running at the end)")
            return
        os.makedirs(CACHE, exist_ok=True)
        logf = open(os.path.join(CACHE, "dockerd.log"), "ab")
        cmd = ["dockerd", "--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false"]
        log("$ " + " ".join(cmd) + f" (log: {logf.name})")
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while not docker_answers():
            if self.proc.poll() is not None:
                raise SystemExit(f"dockerd exited with {self.proc.returncode}; see {logf.name}")
            if time.monotonic() > deadline:
                raise SystemExit(f"dockerd did not answer within 60 s; see {logf.name}")
            time.sleep(0.5)
        log(f"dockerd {self.proc.pid} is up")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        log(f"stopping dockerd {self.proc.pid}")
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def image_exists(name: str) -> bool:
    return subprocess.run([DOCKER, "image", "inspect", name], capture_output=True).returncode == 0


def ensure_base_image() -> None:
    if image_exists(BASE_IMAGE):
        log(f"base image {BASE_IMAGE} present")
        return
    rootfs = os.path.join(CACHE, "rootfs-bookworm")
    done = rootfs + ".done"
    if not os.path.exists(done):
        shutil.rmtree(rootfs, ignore_errors=True)
        os.makedirs(CACHE, exist_ok=True)
        run("debootstrap", "--variant=minbase", "bookworm", rootfs)
        open(done, "w").close()
    # apt's lists and caches, docs and locales stay out (as in Debian's own images): the image's apt-get
    # update fetches fresh lists anyway
    excludes = ["./var/lib/apt/lists/*", "./var/cache/apt/*", "./usr/share/doc/*", "./usr/share/man/*",
                "./usr/share/locale/*", "./usr/share/info/*"]
    tar_cmd = ["tar", "-C", rootfs, *(f"--exclude={e}" for e in excludes), "-c", "."]
    log(f"$ {' '.join(tar_cmd)} | docker import - {BASE_IMAGE}")
    tar = subprocess.Popen(tar_cmd, stdout=subprocess.PIPE)
    subprocess.run([DOCKER, "import", "-", BASE_IMAGE], stdin=tar.stdout, check=True, stdout=subprocess.DEVNULL)
    tar.stdout.close()
    if tar.wait() != 0:
        raise SystemExit("tar of the debootstrap rootfs failed")


def build_image() -> float:
    shutil.copyfile(HOST_CA, CONTEXT_CA)
    try:
        t0 = time.monotonic()
        run(DOCKER, "build", "--network", "host", "-f", "docker/Dockerfile",
            "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "--build-arg", "PIP_CERT=docker/ca-bundle.crt",
            "-t", IMAGE, ".", cwd=REPO)
        return time.monotonic() - t0
    finally:
        os.unlink(CONTEXT_CA)


def image_size(name: str) -> int:
    return int(out(DOCKER, "image", "inspect", "-f", "{{.Size}}", name))


class Compose:
    def __init__(self, path: str):
        self.path = path

    def __call__(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return run("docker-compose", "-p", PROJECT, "-f", self.path, *args, **kw)

    def container(self, service: str) -> str:
        return out("docker-compose", "-p", PROJECT, "-f", self.path, "ps", "-q", service)


def health(container: str) -> tuple[str, str]:
    state = json.loads(out(DOCKER, "inspect", "-f", "{{json .State}}", container))
    return state.get("Status", "?"), (state.get("Health") or {}).get("Status", "none")


def wait_healthy(containers: dict[str, str], timeout: float = HEALTHY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while True:
        states = {svc: health(c) for svc, c in containers.items()}
        if states != last:
            log("health: " + ", ".join(f"{svc}={st}/{h}" for svc, (st, h) in sorted(states.items())))
            last = states
        if all(h == "healthy" for _, h in states.values()):
            return
        dead = [svc for svc, (st, _) in states.items() if st in ("exited", "dead")]
        if dead or time.monotonic() > deadline:
            for svc in dead or containers:
                subprocess.run([DOCKER, "logs", "--tail", "60", containers[svc]])
                last_check = out(DOCKER, "inspect", "-f", "{{json .State.Health}}", containers[svc])
                print(f"--- {svc} health: {last_check[-1500:]}", flush=True)
            raise SystemExit(f"not healthy: {'exited ' + ','.join(dead) if dead else f'after {timeout:.0f} s'}")
        time.sleep(0.5)


def client_check(bootstrap: str, compose: Compose, containers: dict[str, str], node_ids: dict[int, str]) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"docker-test-{uuid.uuid4().hex[:8]}"
    quiet = {"log_level": 4}  # librdkafka's warnings and errors, not its notices
    admin = AdminClient({"bootstrap.servers": bootstrap, **quiet})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    deadline = time.monotonic() + 30
    while True:  # every partition in the metadata, with a leader and 3 replicas
        md = admin.list_topics(topic, timeout=20).topics[topic]
        parts = sorted(md.partitions.values(), key=lambda p: p.id)
        if len(parts) == 3 and all(p.leader >= 0 and len(p.replicas) == 3 for p in parts):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"topic {topic} metadata: {md.error} " + ", ".join(
                f"p{p.id} replicas={p.replicas} leader={p.leader}" for p in parts))
        time.sleep(0.5)
    log(f"topic {topic}: " + ", ".join(f"p{p.id} replicas {p.replicas} leader {p.leader}" for p in parts))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 120000, "linger.ms": 5, **quiet})
    errors: list[str] = []

    def produce(prefix: str, n: int) -> list[str]:
        values = [f"{prefix}-{i}" for i in range(n)]
        for v in values:
            producer.produce(topic, v.encode(), key=v.encode(),
                             on_delivery=lambda err, msg: err and errors.append(str(err)))
            producer.poll(0)
        left = producer.flush(150)
        assert left == 0 and not errors, f"{prefix}: {left} undelivered, errors {errors[:5]}"
        return values

    def kcat_produce(prefix: str, n: int) -> list[str]:
        if shutil.which("kcat") is None:
            return []
        values = [f"{prefix}-{i}" for i in range(n)]
        run("kcat", "-b", bootstrap, "-P", "-t", topic, "-X", "acks=all", input="\n".join(values) + "\n")
        return values

    expected = produce("before", 1000) + kcat_produce("kcat-before", 100)
    log(f"produced {len(expected)} records with every node up")

    leader = admin.list_topics(topic, timeout=20).topics[topic].partitions[0].leader
    victim = node_ids[leader]
    log(f"killing {victim} (node {leader}, leader of partition 0)")
    run(DOCKER, "kill", containers[victim])
    expected += produce("during", 1000) + kcat_produce("kcat-during", 100)
    log(f"produced {len(expected)} records in all, {victim} down")

    run(DOCKER, "start", containers[victim])
    t0 = time.monotonic()
    wait_healthy({victim: containers[victim]})
    log(f"{victim} healthy again {time.monotonic() - t0:.1f} s after docker start")
    expected += produce("after", 500)

    deadline = time.monotonic() + 90
    while True:  # the restarted node back in every ISR
        parts = admin.list_topics(topic, timeout=20).topics[topic].partitions.values()
        if all(len(p.isrs) == 3 for p in parts):
            log("every partition's ISR has 3 replicas again")
            break
        if time.monotonic() > deadline:
            raise SystemExit("ISR not back to 3: " + ", ".join(f"p{p.id} isr={p.isrs}" for p in parts))
        time.sleep(1)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **quiet})
    consumer.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + 120
    while len(got) < len(expected) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        assert not msg.error(), msg.error()
        got.append(msg.value().decode())
    consumer.close()
    missing = set(expected) - set(got)
    assert not missing, f"confluent-kafka: {len(missing)} of {len(expected)} missing, e.g. {sorted(missing)[:5]}"
    assert len(got) == len(expected), f"confluent-kafka read {len(got)} records for {len(expected)} produced"
    log(f"confluent-kafka consumed all {len(got)} records, no duplicates")

    if shutil.which("kcat"):
        lines = run("kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                    capture=True).stdout.splitlines()
        missing = set(expected) - set(lines)
        assert not missing and len(lines) == len(expected), \
            f"kcat read {len(lines)} lines for {len(expected)}, {len(missing)} missing"
        log(f"kcat consumed all {len(lines)} records")


def main() -> int:
    if not os.path.exists(COMPOSE_FILE):
        raise SystemExit(f"{COMPOSE_FILE} does not exist")
    ensure_packages()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up (finally) on SIGTERM too
    dockerd = Dockerd()
    work = tempfile.mkdtemp(prefix="odradek-docker-test-")
    compose = None
    try:
        dockerd.start()
        ensure_base_image()
        build_s = build_image()
        size = image_size(IMAGE)
        base_size = image_size(BASE_IMAGE)
        log(f"image {IMAGE}: {size / 1e6:.1f} MB ({(size - base_size) / 1e6:.1f} MB over the base "
            f"{BASE_IMAGE}, {base_size / 1e6:.1f} MB); build {build_s:.0f} s")

        host_file = os.path.join(work, "compose-host.yaml")
        ports_file = os.path.join(work, "ports.json")
        run(sys.executable, os.path.join(REPO, "docker", "compose_host.py"), COMPOSE_FILE, "--image", IMAGE,
            "--out", host_file, "--ports-json", ports_file)
        with open(ports_file) as f:
            bootstrap = json.load(f)["bootstrap"]
        with open(host_file) as f:
            services = yaml.safe_load(f)["services"]
        node_ids = {int(s["environment"]["KAFKA_NODE_ID"]): name for name, s in services.items()
                    if "broker" in str(s["environment"].get("KAFKA_PROCESS_ROLES", ""))}
        compose = Compose(host_file)
        compose("config", "-q")
        compose("down", "-v", check=False, capture=True)  # leftovers of an interrupted run

        t0 = time.monotonic()
        compose("up", "-d")
        containers = {svc: compose.container(svc) for svc in services}
        wait_healthy(containers)
        up_healthy = time.monotonic() - t0
        log(f"all {len(containers)} containers healthy {up_healthy:.1f} s after `docker-compose up`")

        client_check(bootstrap, compose, containers, node_ids)
        print(f"\ndocker-test passed: image {IMAGE} {size / 1e6:.1f} MB on {BASE_IMAGE}; "
              f"up -> all {len(containers)} healthy {up_healthy:.1f} s; bootstrap {bootstrap}", flush=True)
        return 0
    finally:
        if compose is not None and os.environ.get("ODRADEK_KEEP_UP") != "1":
            compose("down", "-v", "--timeout", "20", check=False)
        if os.path.exists(CONTEXT_CA):
            os.unlink(CONTEXT_CA)
        if os.environ.get("ODRADEK_KEEP_UP") != "1":
            dockerd.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
