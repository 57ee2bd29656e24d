"""The cost of TLS on a ZooKeeper write: the same small writes by the project's ZooKeeper client
(``tiered.zk_client.ZkClient``, kazoo underneath) to a TLS-only server and to a plaintext one,
both up at once on this machine and measured in one run, the two alternating.

Setup: two standalone ZooKeeper 3.8 servers (``cli.launch.zookeeper``) with the settings of a
managed one (``tickTime`` 500 ms, ``forceSync`` as ``--force-sync`` says, off by default so that
the transport, not the disk, is what is compared):

- *tls*: ``secureClientPort`` only, Netty's connection factory, a client certificate required
  (``ssl.clientAuth=need``), certificates from ``cli.security.certs`` (P-256), the client
  configured by the ``zookeeper.ssl.*`` keys as the daemons are;
- *plaintext*: ``clientPort``.

Measured, per run, for each server, in blocks of 50 writes that alternate between the two
servers (which goes first alternating too), so that a busy machine weighs on both alike:

1. *setData*: ``--ops`` (2000) ``set`` calls of a 100-byte value on one znode, each waited for
   (a write acknowledged after the server's commit); the median write's seconds;
2. *create*: ``--ops`` ``create`` calls of new 100-byte znodes, each waited for; the median;
3. then ``sync`` and a read of the last value and of the children (verified).

Each figure is the median over ``--runs`` (7) runs. The session is opened (TLS handshake
included) before the timing starts: the figures are a write on an established session, which is
what the daemons do all day.

Verified, exiting 1 on a mismatch (timings are never asserted): every write is read back; the TLS
server refuses a plaintext client.

ratio = tls / plaintext seconds per write (goal <= 1.3).

Usage: ``python bench/zookeeper_tls.py [--quick] [--runs 7] [--ops 2000] [--force-sync]
[--out PATH]`` (results default to ``bench/results/zookeeper_tls.json``; ``--quick`` is 3 runs of
200 writes).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kazoo.handlers.threading import KazooTimeoutError

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
from cli.launch.zookeeper import ServerTls, ZooKeeperServer
from cli.security.certs import CertificateAuthority
from tiered.security.zookeeper_auth import NO_SECURITY, ZooKeeperSecurity
from tiered.zk_client import ZkClient

DEFAULT_OUT = RESULTS_DIR / "zookeeper_tls.json"
VARIANTS = ("plaintext", "tls")
FIGURES = ("setData", "create")
DEFAULT_RUNS, DEFAULT_OPS = 7, 2000
QUICK_RUNS, QUICK_OPS = 3, 200
GOAL = 1.3  # tls / plaintext seconds per write, at most
VALUE = b"v" * 100
SESSION_TIMEOUT_S = 10.0
START_TIMEOUT_S = 30.0
REFUSAL_TIMEOUT_S = 3.0
BLOCK = 50  # writes of one variant before the other's turn

Log = Callable[[str], None]


def issue(root: Path) -> tuple[ServerTls, dict[str, str]]:
    """The server's TLS and the client's ``zookeeper.ssl.*`` keys, from one new CA."""
    ca = CertificateAuthority.create()
    ca_file = ca.write_certificate(root / "ca.pem")
    server = ca.issue("CN=zookeeper,OU=zookeepers,O=tiered").write_pem_files(root, "zookeeper")
    client = ca.issue("CN=bench,OU=users,O=tiered").write_pem_files(root, "bench")
    return ServerTls(server.keystore, ca_file), {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.ssl.keystore.location": str(client.keystore),
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(ca_file),
        "zookeeper.ssl.truststore.type": "PEM",
    }


def connect(server: ZooKeeperServer, security: ZooKeeperSecurity) -> ZkClient:
    client = ZkClient(server.connect_string, SESSION_TIMEOUT_S, security)
    client.start(START_TIMEOUT_S)
    return client


class Writer:
    """One variant's writes in one run: a znode to set, a parent to create under, each write's
    seconds."""

    def __init__(self, client: ZkClient, run: int) -> None:
        self.kazoo = client.kazoo
        self.base = f"/bench-{run}"
        self.node = f"{self.base}/data"
        self.kazoo.create(self.base, b"")
        self.kazoo.create(self.node, b"")
        self.latencies_s: dict[str, list[float]] = {figure: [] for figure in FIGURES}

    def write(self, figure: str, count: int) -> None:
        latencies = self.latencies_s[figure]
        for i in range(len(latencies), len(latencies) + count):
            started = time.perf_counter()
            if figure == "setData":
                self.kazoo.set(self.node, VALUE + str(i).encode())
            else:
                self.kazoo.create(f"{self.base}/n-{i:06d}", VALUE)
            latencies.append(time.perf_counter() - started)

    def median_s(self) -> dict[str, float]:
        """Each figure's median write: a write preempted by the machine's other work is one
        outlier among many, not a share of a mean."""
        return {figure: statistics.median(self.latencies_s[figure]) for figure in FIGURES}

    def verify(self) -> list[str]:
        self.kazoo.sync(self.base)
        failures = []
        last = len(self.latencies_s["setData"]) - 1
        if self.kazoo.get(self.node)[0] != VALUE + str(last).encode():
            failures.append(f"{self.node} does not hold the last value written")
        created = len(self.kazoo.get_children(self.base)) - 1
        wanted = len(self.latencies_s["create"])
        if created != wanted:
            failures.append(f"{created} znodes under {self.base}, wanted {wanted}")
        return failures


def one_run(
    clients: dict[str, ZkClient], run: int, ops: int
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Both figures for both variants, in blocks of ``BLOCK`` writes that alternate between the
    variants (the first of each pair alternating too), so that both see the same machine."""
    writers = {variant: Writer(client, run) for variant, client in clients.items()}
    for figure in FIGURES:
        for block, first in enumerate(range(0, ops, BLOCK)):
            order = VARIANTS if block % 2 == 0 else tuple(reversed(VARIANTS))
            for variant in order:
                writers[variant].write(figure, min(BLOCK, ops - first))
    failures = [f"{v}: run {run}: {f}" for v, w in writers.items() for f in w.verify()]
    return {variant: writer.median_s() for variant, writer in writers.items()}, failures


def plaintext_refused(server: ZooKeeperServer) -> bool:
    client = ZkClient(server.connect_string, REFUSAL_TIMEOUT_S, NO_SECURITY)
    kazoo_log = logging.getLogger("kazoo")
    level = kazoo_log.level
    kazoo_log.setLevel(logging.CRITICAL)  # its every refused attempt, expected here
    try:
        client.kazoo.start(timeout=REFUSAL_TIMEOUT_S)
    except KazooTimeoutError:
        return True
    finally:
        client.close()
        kazoo_log.setLevel(level)
    return False


def measure(root: Path, runs: int, ops: int, force_sync: bool, log: Log) -> dict[str, Any]:
    server_tls, client_keys = issue(root)
    servers = {
        "plaintext": ZooKeeperServer(root / "plaintext", force_sync=force_sync),
        "tls": ZooKeeperServer(root / "tls", force_sync=force_sync, tls=server_tls),
    }
    securities = {"plaintext": NO_SECURITY, "tls": ZooKeeperSecurity.from_config(client_keys)}
    samples: dict[str, dict[str, list[float]]] = {v: {f: [] for f in FIGURES} for v in VARIANTS}
    failures: list[str] = []
    try:
        for server in servers.values():
            server.start()
        if not plaintext_refused(servers["tls"]):
            failures.append("the TLS server gave a plaintext client a session")
        clients = {v: connect(servers[v], securities[v]) for v in VARIANTS}
        try:
            for run in range(runs):
                figures, found = one_run(clients, run, ops)
                failures += found
                for variant, medians in figures.items():
                    for figure, seconds in medians.items():
                        samples[variant][figure].append(seconds)
                    log(
                        f"run {run + 1}/{runs} {variant:>9}: "
                        + ", ".join(f"{f} {s * 1e3:.3f} ms" for f, s in medians.items())
                    )
        finally:
            for client in clients.values():
                client.close()
    finally:
        for server in servers.values():
            server.stop()
    medians = {
        v: {f: statistics.median(samples[v][f]) for f in FIGURES} for v in VARIANTS if samples[v]
    }
    return {"samples": samples, "medians": medians, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, help=f"runs per server ({DEFAULT_RUNS})")
    parser.add_argument("--ops", type=int, help=f"writes per figure per run ({DEFAULT_OPS})")
    parser.add_argument("--force-sync", action="store_true", help="forceSync=yes on both servers")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_RUNS} runs of {QUICK_OPS} writes"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    runs = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS)
    ops = args.ops or (QUICK_OPS if args.quick else DEFAULT_OPS)
    if runs < 1 or ops < 1:
        parser.error("--runs and --ops want at least 1")

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started = utc_now(), time.perf_counter()
    outcome: dict[str, Any] = {"samples": {}, "medians": {}, "failures": []}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-zookeeper-tls-") as root:
            outcome = measure(Path(root), runs, ops, args.force_sync, log)
    except Exception:
        outcome["failures"].append(f"crashed:\n{traceback.format_exc()}")
        log(f"CRASHED:\n{traceback.format_exc()}")
    medians = outcome["medians"]
    complete = set(medians) == set(VARIANTS)
    summary = (
        [
            summary_row(
                "TLS, client certificate required",
                f"one {figure} of 100 bytes, waited for (median of {runs} runs' medians)",
                medians["tls"][figure],
                "s",
                "the same on a plaintext server",
                medians["plaintext"][figure],
            )
            for figure in FIGURES
        ]
        if complete
        else []
    )
    ratios = {figure: row["ratio"] for figure, row in zip(FIGURES, summary, strict=False)}
    failures = outcome["failures"]
    document = {
        "benchmark": "zookeeper_tls",
        "description": (
            "A ZooKeeper write by the project's kazoo client on an established session: to a "
            "TLS-only server (client certificate required) against a plaintext one, both on "
            "this machine in one run, alternating. ratio = tls / plaintext seconds per write."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": time.perf_counter() - started,
        "machine": machine_info(),
        "load_average_at_end": load_average(),
        "code": {"tiered": code_fingerprint("tiered")},
        "summary": summary,
        "settings": {"runs": runs, "ops": ops, "force_sync": args.force_sync, "quick": args.quick},
        "goal": {"max_ratio": GOAL},
        "ratios": ratios,
        "meets_goal": bool(ratios) and all(r is not None and r <= GOAL for r in ratios.values()),
        "results": {"samples_s": outcome["samples"], "medians_s": medians},
        "failures": failures,
        "ok": not failures and complete,
    }
    out = write_json(args.out, document)
    if complete:
        print(
            format_table(
                ["write", "plaintext (ms)", "tls (ms)", "tls / plaintext"],
                [
                    [
                        figure,
                        f"{medians['plaintext'][figure] * 1e3:.3f}",
                        f"{medians['tls'][figure] * 1e3:.3f}",
                        f"{ratios[figure]:.2f}",
                    ]
                    for figure in FIGURES
                ],
            )
        )
    log(f"goal tls / plaintext <= {GOAL}: {'met' if document['meets_goal'] else 'NOT met'}")
    log(f"{'ok' if document['ok'] else 'FAILED'}; results in {out}")
    for failure in failures[:20]:
        log(f"  {failure}")
    return 0 if document["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
