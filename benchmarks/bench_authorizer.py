"""StandardAuthorizer.authorize() with 10,000 ACLs: the cached index against an index rebuilt for every call.

Run:  .venv/bin/python benchmarks/bench_authorizer.py                  # ~20 s
      .venv/bin/python benchmarks/bench_authorizer.py --acls 50000 --rounds 9 --json authz.json

Pure (cluster/authorizer.py, no broker). The ACLs are over topics, mixed: literal names, PREFIXED patterns of
several lengths and the literal wildcard ``*``, for many principals, ALLOW and a few DENY, some host-bound. A
handler asks ``update(image.acls)`` then ``authorize(...)`` on every request; ``update`` keeps the index while the
mapping is the same object (``cached``), so only a new image pays for a rebuild. The other arm (``rebuilt``) hands a
new mapping every call, so each call rebuilds the ``AclIndex`` as an authorizer without that cache would.

Each call authorizes one action (WRITE or READ or DESCRIBE on a topic) for a principal; the queries are a fixed
random mix of topics named by a literal ACL, covered only by a prefix, and covered by nothing but the wildcard, so
the three lookups are all timed. The arms alternate in rounds (cached, rebuilt, cached, ...); figures are the
median over rounds of microseconds per call, and their ratio. The decisions of both arms are checked equal.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cluster.acls import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl  # noqa: E402
from cluster.authorizer import ALLOWED, Action, StandardAuthorizer  # noqa: E402

OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL)


def make_acls(n: int, rng: random.Random) -> dict[int, StandardAcl]:
    """``n`` topic ACLs: 60 % literal, 39.9 % prefixed (prefix lengths 4 to 12), 0.1 % on the wildcard; 5 % DENY;
    500 principals; 10 % bound to a host."""
    acls = {}
    n_wild = max(1, n // 1000)
    n_prefixed = n * 399 // 1000
    for i in range(n):
        if i < n_wild:
            name, pattern = "*", PatternType.LITERAL
        elif i < n_wild + n_prefixed:
            name = f"team-{i % 997:03d}-"[:rng.randint(6, 9)] + f"{i:05d}"[:rng.randint(0, 3)]
            pattern = PatternType.PREFIXED
        else:
            name, pattern = f"team-{i % 997:03d}-topic-{i:05d}", PatternType.LITERAL
        acls[i] = StandardAcl(
            ResourceType.TOPIC, name, pattern, f"User:user-{rng.randrange(500)}",
            f"10.0.0.{rng.randrange(256)}" if rng.random() < 0.1 else "*", rng.choice(OPERATIONS),
            AclPermissionType.DENY if rng.random() < 0.05 else AclPermissionType.ALLOW)
    return acls


def make_queries(acls: dict[int, StandardAcl], n: int, rng: random.Random) -> list[tuple[str, str, Action]]:
    literal = [a.resource_name for a in acls.values()
               if a.pattern_type is PatternType.LITERAL and a.resource_name != "*"]
    prefixed = [a.resource_name for a in acls.values() if a.pattern_type is PatternType.PREFIXED]
    out = []
    for i in range(n):
        kind = i % 3
        topic = (rng.choice(literal) if kind == 0 else rng.choice(prefixed) + f"-stream-{i}" if kind == 1
                 else f"unrelated-{i}")
        op = rng.choice((AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE))
        out.append((f"User:user-{rng.randrange(500)}", f"10.0.0.{rng.randrange(256)}",
                    Action(op, ResourceType.TOPIC, topic)))
    return out


def run_arm(authorizer: StandardAuthorizer, acls: dict, queries: list, fresh_mapping: bool) -> tuple[float, list]:
    """Microseconds per call over ``queries``; the decisions."""
    results = []
    append = results.append
    t0 = time.perf_counter()
    for principal, host, action in queries:
        authorizer.update(dict(acls) if fresh_mapping else acls)
        append(authorizer.authorize(principal, host, [action])[0])
    return (time.perf_counter() - t0) / len(queries) * 1e6, results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=7, help="rounds of each arm, alternating")
    ap.add_argument("--calls", type=int, default=20_000, help="calls per round of the cached arm")
    ap.add_argument("--rebuilt-calls", type=int, default=30, help="calls per round of the rebuilt arm")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    rng = random.Random(args.seed)
    acls = make_acls(args.acls, rng)
    queries = make_queries(acls, args.calls, rng)
    authorizer = StandardAuthorizer()
    authorizer.complete_initial_load()
    authorizer.update(acls)
    cached_us, rebuilt_us = [], []
    for _ in range(args.rounds):
        us, cached = run_arm(authorizer, acls, queries, False)
        cached_us.append(us)
        us, rebuilt = run_arm(authorizer, acls, queries[:args.rebuilt_calls], True)
        rebuilt_us.append(us)
        if rebuilt != cached[:args.rebuilt_calls]:
            raise SystemExit("the arms disagree on a decision")
        authorizer.update(acls)  # the cached arm's mapping again (one rebuild, outside the timing)
    allowed = sum(r is ALLOWED for r in cached) / len(cached)
    kinds = {PatternType.LITERAL: 0, PatternType.PREFIXED: 0}
    for a in acls.values():
        kinds[a.pattern_type] += 1
    wild = sum(a.resource_name == "*" for a in acls.values())
    report = {"acls": args.acls, "literal": kinds[PatternType.LITERAL] - wild, "prefixed": kinds[PatternType.PREFIXED],
              "wildcard": wild, "prefix_lengths": len({len(a.resource_name) for a in acls.values()
                                                       if a.pattern_type is PatternType.PREFIXED}),
              "allowed_share": allowed, "rounds": args.rounds, "load_start": load,
              "cached_us_per_call": statistics.median(cached_us), "cached_us_rounds": cached_us,
              "rebuilt_us_per_call": statistics.median(rebuilt_us), "rebuilt_us_rounds": rebuilt_us}
    report["rebuilt_over_cached"] = report["rebuilt_us_per_call"] / report["cached_us_per_call"]
    report["load_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"StandardAuthorizer.authorize, {args.acls:,} topic ACLs ({report['literal']:,} literal, "
          f"{report['prefixed']:,} prefixed over {report['prefix_lengths']} prefix lengths, {wild} wildcard); "
          f"one action per call, {allowed:.0%} allowed; load average {load} -> {report['load_end']}")
    print(f"{'arm':<34}{'us/call (median)':>18}{'min-max':>20}")
    for label, xs in (("cached index (same mapping)", cached_us), ("index rebuilt per call", rebuilt_us)):
        print(f"{label:<34}{statistics.median(xs):>18.2f}{f'{min(xs):.2f}-{max(xs):.2f}':>20}")
    print(f"rebuilt / cached: {report['rebuilt_over_cached']:,.0f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
