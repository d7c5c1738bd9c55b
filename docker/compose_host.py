"""Generate a host-network variant of a compose file (this machine's adapter for `make docker-test`).

On a machine where dockerd runs with `--bridge=none` (no container networks), containers share the host's
network. docker-compose refuses `network_mode: host` beside published `ports`, and docker-compose 1.29
cannot remove keys in an override file, so this writes a whole new file from docker/compose.yaml:

* every service gets `network_mode: host`; `ports`, `expose`, `networks`, `links`, `hostname`,
  `container_name` and `build` go (the image is given with --image);
* every address in a `KAFKA_*` variable (listeners, advertised listeners, quorum voters, bootstrap servers,
  the metrics listener) moves to 127.0.0.1 and a distinct free loopback port per (node, container port):
  `kafka-2:9093` becomes `127.0.0.1:<node 2's port for 9093>`, `PLAINTEXT_HOST://localhost:29092` (published
  as 29092:9092) becomes `PLAINTEXT_HOST://127.0.0.1:<node's port for 9092>`, `CONTROLLER://:9093` or
  `0.0.0.0:9308` binds 127.0.0.1 only;
* the top-level `networks` and `x-` extension fields go (anchors are already resolved); volumes stay.

The shipped docker/compose.yaml stays the ordinary file users run with `docker compose up`.

    python docker/compose_host.py docker/compose.yaml --image odradek:test --out /tmp/compose-host.yaml \
        --ports-json /tmp/ports.json

--ports-json writes {"bootstrap": "127.0.0.1:p1,...", "nodes": {service: {"external": "127.0.0.1:p", ...}}}:
each service's addresses that were published to the host (the ones a client on the host uses).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys

import yaml

LOOPBACK = "127.0.0.1"
LOCAL_HOSTS = {"", "0.0.0.0", "localhost", "127.0.0.1", "::", "[::]", "[::1]", "::1"}
DROPPED_KEYS = ("ports", "expose", "networks", "links", "hostname", "container_name", "build", "domainname",
                "mac_address", "dns", "dns_search")
# host:port, optionally after NAME:// or id@; host is a name, an IPv4 address, [v6] or empty (":9093")
ADDRESS = re.compile(r"(?P<pre>(?:[A-Za-z0-9_]+://)|(?:\d+@)|^|(?<=[,\s]))"
                     r"(?P<host>\[[0-9a-fA-F:]*\]|[A-Za-z0-9_.\-]*):(?P<port>\d{1,5})(?=$|[,\s/])")


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        out = {}
        for item in env:
            key, sep, value = str(item).partition("=")
            out[key] = value if sep else None
        return out
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def _published(service: dict) -> dict[int, int]:
    """host port -> container port, from the short (`"29092:9092"`, `"127.0.0.1:29092:9092"`) and long syntax"""
    out = {}
    for p in service.get("ports") or []:
        if isinstance(p, dict):
            if p.get("published") is not None:
                out[int(p["published"])] = int(p["target"])
            continue
        spec = str(p).split("/")[0]
        parts = spec.rsplit(":", 2)
        if len(parts) >= 2 and parts[-2].isdigit() and parts[-1].isdigit():
            out[int(parts[-2])] = int(parts[-1])
    return out


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


class PortPlan:
    """A distinct free loopback port for each (service, container port), handed out from base_port up."""

    def __init__(self, base_port: int):
        self.next = base_port
        self.ports: dict[tuple[str, int], int] = {}

    def get(self, service: str, container_port: int) -> int:
        key = (service, container_port)
        if key not in self.ports:
            while not _port_free(self.next):
                self.next += 1
            if self.next > 65535:
                raise SystemExit("compose_host: no free loopback port left")
            self.ports[key] = self.next
            self.next += 1
        return self.ports[key]


def generate(compose: dict, image: str, base_port: int) -> tuple[dict, dict]:
    services = compose.get("services") or {}
    if not services:
        raise SystemExit("compose_host: the file has no services")
    names: dict[str, str] = {}  # every name a service is reached by -> service
    for name, svc in services.items():
        for alias in (name, svc.get("hostname"), svc.get("container_name")):
            if alias:
                names[str(alias)] = name
    plan = PortPlan(base_port)
    published = {name: _published(svc) for name, svc in services.items()}
    unknown: list[str] = []
    for name, svc in services.items():  # each node's listeners first, so its ports come in one run
        for m in ADDRESS.finditer(_environment(svc).get("KAFKA_LISTENERS") or ""):
            plan.get(name, int(m.group("port")))

    def rewrite(service: str, var: str, value: str) -> str:
        def sub(m: re.Match) -> str:
            host, port = m.group("host"), int(m.group("port"))
            if host in names:
                target, cport = names[host], port
            elif host in LOCAL_HOSTS:
                # an address on this node; a published host port (advertised as localhost:29092) is the
                # container port behind it
                target, cport = service, published[service].get(port, port)
            else:
                unknown.append(f"{service}: {var}={value}")
                return m.group(0)
            return f"{m.group('pre')}{LOOPBACK}:{plan.get(target, cport)}"
        return ADDRESS.sub(sub, value)

    out_services = {}
    for name, svc in services.items():
        new = {k: v for k, v in svc.items() if k not in DROPPED_KEYS}
        new["image"] = image
        new["network_mode"] = "host"
        env = _environment(svc)
        roles = (env.get("KAFKA_PROCESS_ROLES") or "").replace(" ", "")
        if env.get("KAFKA_ADVERTISED_LISTENERS") and not env.get("KAFKA_LISTENERS"):
            raise SystemExit(f"compose_host: {name} sets KAFKA_ADVERTISED_LISTENERS without KAFKA_LISTENERS; "
                             "the host variant needs explicit listeners to bind them on 127.0.0.1 only")
        if roles and "broker" in roles and not env.get("KAFKA_LISTENERS"):
            raise SystemExit(f"compose_host: {name} has no KAFKA_LISTENERS")
        new["environment"] = {var: rewrite(name, var, value) if value is not None and var.startswith("KAFKA_")
                              else value for var, value in env.items()}
        out_services[name] = new
    if unknown:
        raise SystemExit("compose_host: addresses that are neither a service nor this node:\n  " + "\n  ".join(unknown))

    out = {k: v for k, v in compose.items() if k not in ("services", "networks") and not str(k).startswith("x-")}
    out["services"] = out_services

    nodes = {}
    bootstrap = []
    for name in services:
        entry = {}
        for host_port, cport in published[name].items():
            entry[str(host_port)] = f"{LOOPBACK}:{plan.get(name, cport)}" if (name, cport) in plan.ports else None
        # the listener a client on the host uses: the advertised one that was published
        adv = out_services[name]["environment"].get("KAFKA_ADVERTISED_LISTENERS") or ""
        orig_adv = _environment(services[name]).get("KAFKA_ADVERTISED_LISTENERS") or ""
        for new_l, old_l in zip(adv.split(","), orig_adv.split(",")):
            m = ADDRESS.search(old_l.strip())
            if m and m.group("host") in LOCAL_HOSTS and int(m.group("port")) in published[name]:
                entry["external"] = new_l.strip().split("://", 1)[-1]
                bootstrap.append(entry["external"])
        entry["ports"] = sorted(p for (svc, _), p in plan.ports.items() if svc == name)
        nodes[name] = entry
    return out, {"bootstrap": ",".join(bootstrap), "nodes": nodes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("compose", help="the ordinary compose file (docker/compose.yaml)")
    ap.add_argument("--image", required=True, help="the image every service runs")
    ap.add_argument("--out", required=True, help="where to write the host-network file")
    ap.add_argument("--base-port", type=int, default=24000, help="first loopback port to hand out (default 24000)")
    ap.add_argument("--ports-json", help="write the port plan and the host bootstrap servers here")
    args = ap.parse_args(argv)
    with open(args.compose) as f:
        compose = yaml.safe_load(f)
    out, info = generate(compose, args.image, args.base_port)
    header = (f"# GENERATED by docker/compose_host.py from {args.compose}: host networking, 127.0.0.1 only.\n"
              "# This machine's adapter for `make docker-test`; users run the original file.\n")
    with open(args.out, "w") as f:
        f.write(header)
        yaml.dump(out, f, Dumper=_NoAliases, sort_keys=False, default_flow_style=False)
    if args.ports_json:
        with open(args.ports_json, "w") as f:
            json.dump(info, f, indent=2)
    print(f"compose_host: wrote {args.out}; host bootstrap {info['bootstrap']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
