"""One authorization check (``tiered.security.authorizer.StandardAuthorizer``) with 10^3 .. 10^5
ACLs, against a linear scan of the same ACLs, measured in one run: the check must stay flat as the
ACLs grow, where the scan grows with them.

The ACLs are what a large cluster holds: per topic, an ALLOW of Read and Write for its own
principal (half of them literal ``topic-N``, half prefixed ``team-N-``), plus a few cluster ACLs
and a literal ``*`` Describe. Each size is checked with a mix of requests (allowed by a literal,
allowed by a prefix, denied for another principal, a topic no ACL names), each timed many times
and the median taken. The baseline is Kafka's semantics done the naive way: every ACL of the
cluster looked at (``AclBindingFilter`` style) for each check. Both must give the same answer
for every request (else the process exits 1; timings are never asserted).

ratio = check median / scan median; ``flatness`` = check median at the largest size / check
median at the smallest (about 1 when the check is O(1) in the number of ACLs).

Usage: ``python bench/authorizer.py [--quick] [--sizes 1000,10000,100000] [--repeat N]
[--out PATH]`` (results default to ``bench/results/authorizer.json``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    format_table,
    load_average,
    machine_info,
    summary_row,
    utc_now,
    write_json,
)
from tiered.security.acl import (
    CLUSTER_NAME,
    IMPLIES_DESCRIBE,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_id,
)
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.principal import KafkaPrincipal, RequestContext

DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
DEFAULT_REPEAT = 2000
QUICK_REPEAT = 200
DEFAULT_OUT = RESULTS_DIR / "authorizer.json"
ALLOW = AclPermissionType.ALLOW


def cluster_acls(size: int) -> list[AclBinding]:
    """``size`` ACLs: two per topic (Read, Write) for its team's principal, literal for even
    teams and prefixed for odd ones, then cluster ACLs and ``*`` Describe."""
    acls: list[AclBinding] = []
    topic = ResourceType.TOPIC
    for i in range(size // 2):
        principal = f"User:team-{i}"
        pattern = (
            ResourcePattern(topic, f"topic-{i}")
            if i % 2 == 0
            else ResourcePattern(topic, f"team-{i}-", PatternType.PREFIXED)
        )
        for op in (AclOperation.READ, AclOperation.WRITE):
            acls.append(AclBinding(pattern, AccessControlEntry(principal, "*", op, ALLOW)))
    cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
    acls.append(
        AclBinding(
            cluster, AccessControlEntry("User:broker", "*", AclOperation.CLUSTER_ACTION, ALLOW)
        )
    )
    acls.append(
        AclBinding(
            ResourcePattern(topic, WILDCARD_RESOURCE),
            AccessControlEntry("User:auditor", "*", AclOperation.DESCRIBE, ALLOW),
        )
    )
    return acls


def requests(size: int) -> list[tuple[str, RequestContext, AclOperation, str, bool]]:
    """(what, context, operation, topic, expected) for a size's mix of checks."""
    teams = size // 2
    even = (teams // 2) & ~1  # a literal team in the middle
    odd = even + 1
    host = "10.0.0.1"

    def ctx(name: str) -> RequestContext:
        return RequestContext(KafkaPrincipal("User", name), host, "PLAINTEXT")

    return [
        ("literal allow", ctx(f"team-{even}"), AclOperation.READ, f"topic-{even}", True),
        ("prefixed allow", ctx(f"team-{odd}"), AclOperation.WRITE, f"team-{odd}-events", True),
        ("other principal", ctx("intruder"), AclOperation.READ, f"topic-{even}", False),
        ("no ACL", ctx(f"team-{even}"), AclOperation.READ, "nobody-named-this", False),
        ("wildcard describe", ctx("auditor"), AclOperation.DESCRIBE, f"topic-{even}", True),
    ]


def scan(
    acls: list[AclBinding], context: RequestContext, operation: AclOperation, topic: str
) -> bool:
    """Kafka's semantics by looking at every ACL (the baseline)."""
    allowed = False
    principal = str(context.principal)
    for binding in acls:
        pattern, entry = binding.pattern, binding.entry
        if pattern.resource_type is not ResourceType.TOPIC:
            continue
        if pattern.pattern_type is PatternType.LITERAL:
            if pattern.name not in (topic, WILDCARD_RESOURCE):
                continue
        elif not topic.startswith(pattern.name):
            continue
        if entry.principal not in (principal, WILDCARD_PRINCIPAL):
            continue
        if entry.host not in ("*", context.client_host):
            continue
        granted = entry.operation
        matches = granted in (operation, AclOperation.ALL) or (
            operation is AclOperation.DESCRIBE and granted in IMPLIES_DESCRIBE
        )
        if not matches:
            continue
        if entry.permission_type is AclPermissionType.DENY:
            return False
        allowed = True
    return allowed


def median_s(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run_size(size: int, repeat: int, log: Any) -> tuple[dict[str, Any], list[str]]:
    acls = cluster_acls(size)
    index = AclIndex({acl_id(b): b for b in acls})
    authorizer = StandardAuthorizer(AuthorizerConfig(enabled=True), lambda: index)
    failures: list[str] = []
    checks: list[float] = []
    scans: list[float] = []
    per_request = {}
    scan_repeat = max(3, repeat // max(1, size // 1000))  # the scan is slow: fewer rounds
    for what, context, operation, topic, expected in requests(size):
        got = authorizer.authorize(context, operation, ResourceType.TOPIC, topic)
        baseline = scan(acls, context, operation, topic)
        if got != expected or baseline != expected:
            failures.append(f"{size} ACLs, {what}: check {got}, scan {baseline}, want {expected}")
        check_s = median_s(
            lambda c=context, o=operation, t=topic: authorizer.authorize(
                c, o, ResourceType.TOPIC, t
            ),
            repeat,
        )
        scan_s = median_s(lambda c=context, o=operation, t=topic: scan(acls, c, o, t), scan_repeat)
        checks.append(check_s)
        scans.append(scan_s)
        per_request[what] = {"check_s": check_s, "scan_s": scan_s}
    result = {
        "acls": len(index),
        "check_s": statistics.median(checks),
        "scan_s": statistics.median(scans),
        "requests": per_request,
    }
    result["ratio"] = result["check_s"] / result["scan_s"]
    log(
        f"{len(index):>7,} ACLs: check {result['check_s'] * 1e6:7.2f} us, "
        f"scan {result['scan_s'] * 1e3:8.3f} ms"
    )
    return result, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated ACL counts (default 1000,10000,100000)")
    parser.add_argument("--repeat", type=int, help=f"checks timed per request ({DEFAULT_REPEAT})")
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    )
    repeat = args.repeat or (QUICK_REPEAT if args.quick else DEFAULT_REPEAT)

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started = utc_now(), time.perf_counter()
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    try:
        for size in sorted(sizes):
            result, found = run_size(size, repeat, log)
            results.append(result)
            failures += found
    except Exception:
        failures.append(f"crashed:\n{traceback.format_exc()}")
        log(f"CRASHED:\n{traceback.format_exc()}")
    flatness = results[-1]["check_s"] / results[0]["check_s"] if len(results) > 1 else None
    summary = [
        summary_row(
            f"{r['acls']:,} ACLs",
            "one authorization check (median)",
            r["check_s"],
            "s",
            "linear scan of the ACLs (median)",
            r["scan_s"],
        )
        for r in results
    ]
    document = {
        "benchmark": "authorizer",
        "description": (
            "One StandardAuthorizer check (indexed ACLs) against a linear scan of the same ACLs, "
            "at growing ACL counts, in one run. ratio = check / scan; flatness = check at the "
            "largest size / check at the smallest."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": time.perf_counter() - started,
        "machine": machine_info(),
        "load_average_at_end": load_average(),
        "code": {"tiered": code_fingerprint("tiered")},
        "summary": summary,
        "settings": {"sizes": sizes, "repeat": repeat, "quick": args.quick},
        "results": results,
        "flatness": flatness,
        "failures": failures,
        "ok": not failures,
    }
    out = write_json(args.out, document)
    print(
        format_table(
            ["ACLs", "check (us)", "scan (ms)", "check / scan"],
            [
                [
                    f"{r['acls']:,}",
                    f"{r['check_s'] * 1e6:.2f}",
                    f"{r['scan_s'] * 1e3:.3f}",
                    f"{r['ratio']:.2e}",
                ]
                for r in results
            ],
        )
    )
    print(f"flatness (largest / smallest check): {flatness}; results in {out}")
    for failure in failures:
        print(f"  {failure}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
