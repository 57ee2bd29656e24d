"""The cost of TLS and the authorizer: the same disables and Kafka produces on a secure cluster
and on a plaintext one, both up at once and measured in one run, the two alternating.

Setup: two real clusters as the integration tests run them (``tests.support.cluster.Cluster``,
KRaft mode: an active controller, a standby and ``--brokers`` (3) brokers, each a separate
process), with the product's defaults for timeouts and backoff and brokers' tiering tasks every
30 s (as ``bench/disable_throughput.py``):

- *plaintext*: gRPC without TLS, no authorizer, a PLAINTEXT Kafka listener (and, for phase 4
  alone, an SSL listener beside it: ``bench/secure_cluster.add_ssl_listener``);
- *secure* (``bench/secure_cluster.py``): gRPC mutual TLS between every process and from the
  bench's clients (certificates from ``cli.security.certs``), ``authorizer.enabled=true``
  with the controllers, brokers and an admin as super users and the bench's clients as ordinary
  principals holding ACLs (prefixed on the bench's topics), and a SASL_SSL Kafka listener with
  SCRAM-SHA-512 for the producer.

Measured, in this order (the order of the two clusters alternates from one sample to the next;
the cluster-wide disable runs once each, plaintext first):

1. *Kafka produce*: ``--size-mb`` MiB (256) of 1 KiB records to a topic of one partition with
   ``bench/kafka_clients.py``'s confluent-kafka producer (acks=1, linger.ms=10, 1 MiB batches),
   until ``flush()`` returns; ``--rounds`` (3) rounds per cluster, each to a new topic, the
   median round's MB/s.
2. *one disable*: ``--repeat`` (20) topics of ``--latency-partitions`` (3) partitions, alone in
   the cluster, each altered to ``remote.storage.enable=false`` with
   ``remote.log.disable.policy=retain``; the time from the alter to the answer of a watch on the
   topic (``WatchTopics``, opened before) that shows DISABLED; median.
3. *all at once*: ``--topics`` (1000) topics of ``--partitions`` (10) partitions, the same alter
   for all of them in one request; the time until a watch over them shows the last one
   DISABLED.
4. *TLS alone* (``listener``): on the plaintext cluster, the same produce as 1 to one broker
   through its PLAINTEXT listener and through its SSL listener (the bench client's certificate
   required), ``--listener-rounds`` (5) rounds each, the order alternating, every topic led by
   the same broker; the median round's MB/s. TLS is the only difference: same broker, same
   process, same run, no SASL and no authorizer.

Every phase records the CPU seconds each process of the cluster used (and, for the produce, the
producer's own, librdkafka's threads included, and the leader broker's busiest threads: its
Kafka listener's event loop, which receives and decrypts, against the handler threads) and the
load average after it: where a secure figure falls behind the plaintext one, the CPU seconds say
which process, and which thread, pays.

One authorization check at 1k, 10k and 100k ACLs is ``bench/authorizer.py``'s figure.

Verified, exiting 1 on a mismatch (timings are never asserted): the secure cluster refuses a
client without a certificate, and the bench's client creating a topic outside its ACLs; every
produce is acknowledged and the partition ends at the record count; every topic disabled is
DISABLED at tiered epoch 1 with ``remote.storage.enable=false`` and, on its broker, every
partition at epoch 1 and not copying.

ratio = secure / plaintext: seconds for the disables (goal <= 1.3), MB/s for the produce (goal
>= 0.7); for phase 4, SSL / PLAINTEXT MB/s (goal >= 0.7).

Usage: ``python bench/security_cost.py [--quick] [--phases produce,single,batched,listener]
[--topics 1000] [--partitions 10] [--brokers 3] [--repeat 20] [--size-mb 256] [--rounds 3]
[--listener-rounds 5] [--idle-window-s 2] [--workdir DIR] [--out PATH]`` (results default to
``bench/results/security_cost.json``; ``--quick`` is 50 topics, 10 repeats, 32 MiB and one round;
``--phases`` runs only those phases, e.g. the produce alone, several times over, on a busy
machine). Before the disables, as in ``bench/disable_throughput.py``, the bench waits until each
process is idle (under 15% of a CPU over ``--idle-window-s``).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    finish_run,
    format_seconds,
    format_table,
    load_average,
    machine_info,
    summarize,
    summary_row,
    thread_cpu_seconds,
    utc_now,
)
from bench.disable_throughput import (
    BROKER_EXTRA,
    CONTROLLER_DEFAULTS,
    IDLE_MAX_RATE,
    IDLE_WINDOW_S,
    Processes,
    batched_disable,
    disable_and_wait,
    log_dirs,
    make_topics,
    raise_open_files_limit,
    verify,
)
from bench.kafka_clients import kafka_produce, own_cpu_seconds
from bench.kafka_floor import Partition, Workload, build_workload, value
from bench.secure_cluster import (
    TOPIC_PREFIX,
    Identities,
    add_ssl_listener,
    grant_clients,
    issue_identities,
    refusals,
    secure_cluster,
    ssl_bootstrap,
)
from tests.support.cluster import Cluster
from tests.support.polling import poll_until
from tiered.cluster.model import TieredState

DEFAULT_OUT = RESULTS_DIR / "security_cost.json"
VARIANTS = ("plaintext", "secure")
RETAIN_DISABLE = {"remote.storage.enable": "false", "remote.log.disable.policy": "retain"}
QUICK = {"topics": 50, "repeat": 10, "size_mb": 32, "rounds": 1}
PHASES = ("produce", "single", "batched", "listener")
LISTENERS = ("PLAINTEXT", "SSL")
GOALS = {"disable": 1.3, "produce": 0.7}  # secure / plaintext: at most, at least
MIB = 1024 * 1024
PROBE_TIMEOUT_S = 60.0

Log = Callable[[str], None]


class Variant:
    """One of the two clusters, its processes and its Kafka clients' settings."""

    def __init__(
        self, name: str, cluster: Cluster, producer: dict[str, Any], idle_window_s: float
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.producer = producer
        self.idle_window_s = idle_window_s
        self.processes: Processes | None = None

    def start(self) -> float:
        begin = time.perf_counter()
        self.cluster.start()
        self.processes = Processes(self.cluster, None, self.idle_window_s)
        return time.perf_counter() - begin

    def cpu(self) -> dict[str, float]:
        assert self.processes is not None
        return self.processes.cpu()

    def used_since(self, before: dict[str, float]) -> dict[str, float]:
        return Processes.used(before, self.cpu())

    def wait_idle(self, log: Log) -> float:
        assert self.processes is not None
        return self.processes.wait_idle(log)


def make_variants(
    root: Path, identities: Identities, brokers: int, idle_window_s: float
) -> dict[str, Variant]:
    plaintext = Cluster(
        root / "plaintext",
        "kraft",
        brokers=brokers,
        controller_extra=dict(CONTROLLER_DEFAULTS),
        broker_extra=dict(BROKER_EXTRA),
    )
    add_ssl_listener(plaintext, identities)
    secure = secure_cluster(
        root / "secure", identities, brokers, dict(CONTROLLER_DEFAULTS), dict(BROKER_EXTRA)
    )
    return {
        "plaintext": Variant("plaintext", plaintext, {}, idle_window_s),
        "secure": Variant("secure", secure, identities.producer_config(), idle_window_s),
    }


def alternating(variants: dict[str, Variant], sample: int) -> list[Variant]:
    """Both clusters, plaintext first on even samples and secure first on odd ones."""
    ordered = [variants[v] for v in VARIANTS]
    return ordered if sample % 2 == 0 else ordered[::-1]


# ----------------------------------------------------------------------------- produce


def busiest_threads(before: dict[str, float], after: dict[str, float]) -> list[float]:
    """The CPU seconds the busiest threads used in between, most first (the Kafka listener's
    event loop, which receives and decrypts, against the handler threads)."""
    used = sorted((after[t] - before.get(t, 0.0) for t in after), reverse=True)
    return [round(u, 3) for u in used[:4]]


def produce_topic(variant: Variant, name: str) -> tuple[Partition, Any, int]:
    """A topic of one partition without tiering, hosted; its leader's gRPC stub and pid."""
    cluster = variant.cluster
    topic_id = cluster.admin.create_topic(name, 1, {})
    leader = cluster.admin.describe_topic(name).partitions[0].leader
    poll_until(
        lambda: (topic_id, 0) in cluster.log_dirs(leader),
        timeout=60,
        what=f"{variant.name}: {name} to be hosted",
    )
    process = cluster.brokers[leader].process
    assert process is not None
    return Partition(name, topic_id), cluster.broker_stub(leader), process.pid


def wait_producer_accepted(variant: Variant, topic: str) -> float:
    """Until the producer's first record is acknowledged (brokers learn a new SCRAM user a moment
    after the controller stored it). Seconds waited."""
    from confluent_kafka import Producer

    begin = time.perf_counter()
    failures: list[str] = []

    def delivered() -> bool:
        errors: list[str] = []
        producer = Producer(
            {
                **variant.producer,
                "log_level": 0,
                "bootstrap.servers": variant.cluster.kafka_bootstrap,
                "message.timeout.ms": 5000,
                "on_delivery": lambda error, _m: errors.append(str(error)) if error else None,
            }
        )
        producer.produce(topic, value(0), partition=0)
        ok = producer.flush(10) == 0 and not errors
        failures[:] = errors
        return ok

    poll_until(
        delivered,
        timeout=PROBE_TIMEOUT_S,
        what=f"{variant.name}: the producer to be accepted ({failures[:1]})",
    )
    return time.perf_counter() - begin


def median_round(found: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round's figures (the lower of an even count), every round's MB/s, and every
    round's problems."""
    ranked = sorted(found, key=lambda f: float(f["mb_per_s"]))
    return {
        **ranked[(len(ranked) - 1) // 2],
        "rounds_mb_per_s": [f["mb_per_s"] for f in found],
        "problems": [p for f in found for p in f["problems"]],
    }


def produce_phase(
    variants: dict[str, Variant], workload: Workload, rounds: int, log: Log
) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        for variant in alternating(variants, r):
            partition, stub, leader_pid = produce_topic(variant, f"{TOPIC_PREFIX}produce-{r}")
            cpu_before, own_before = variant.cpu(), own_cpu_seconds()
            threads_before = thread_cpu_seconds(leader_pid)
            figures, check = kafka_produce(
                variant.cluster.kafka_bootstrap, stub, partition, workload, variant.producer
            )
            figures["cpu_s"] = variant.used_since(cpu_before)
            figures["leader_busiest_threads_cpu_s"] = busiest_threads(
                threads_before, thread_cpu_seconds(leader_pid)
            )
            figures["producer_cpu_s"] = round(own_cpu_seconds() - own_before, 3)
            figures["load_average_after"] = load_average()
            figures["problems"] = check()
            runs[variant.name].append(figures)
            log(
                f"  produce round {r + 1}, {variant.name}: {figures['mb_per_s']:.1f} MB/s; "
                f"CPU s {figures['cpu_s']}, producer {figures['producer_cpu_s']}, leader's "
                f"busiest threads {figures['leader_busiest_threads_cpu_s']}"
            )
    return {name: median_round(found) for name, found in runs.items()}


def topic_led_by(variant: Variant, name: str, leader: int | None) -> tuple[Partition, Any, int]:
    """``produce_topic``'s topic, led by broker ``leader`` (any when None): placement starts at a
    random broker, so topics are made until one lands there (the others stay, empty)."""
    for attempt in range(20 * len(variant.cluster.brokers)):
        made = produce_topic(variant, f"{name}-{attempt}")
        if (
            leader is None
            or variant.cluster.admin.describe_topic(made[0].name, include_partition_state=False)
            .partitions[0]
            .leader
            == leader
        ):
            return made
    raise RuntimeError(f"{variant.name}: no topic of {name} landed on broker {leader}")


def listener_phase(
    variant: Variant, identities: Identities, workload: Workload, rounds: int, log: Log
) -> dict[str, Any]:
    """The same produce through one broker's PLAINTEXT and SSL listeners, alternating."""
    clients = {
        "PLAINTEXT": (variant.cluster.kafka_bootstrap, {}),
        "SSL": (ssl_bootstrap(variant.cluster), identities.ssl_producer_config()),
    }
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in LISTENERS}
    leader: int | None = None
    for r in range(rounds):
        for listener in LISTENERS if r % 2 == 0 else LISTENERS[::-1]:
            partition, stub, leader_pid = topic_led_by(
                variant, f"{TOPIC_PREFIX}listener-{listener.lower()}-{r}", leader
            )
            if leader is None:
                leader = (
                    variant.cluster.admin.describe_topic(
                        partition.name, include_partition_state=False
                    )
                    .partitions[0]
                    .leader
                )
            bootstrap, security = clients[listener]
            threads_before, own_before = thread_cpu_seconds(leader_pid), own_cpu_seconds()
            figures, check = kafka_produce(bootstrap, stub, partition, workload, security)
            figures["leader_busiest_threads_cpu_s"] = busiest_threads(
                threads_before, thread_cpu_seconds(leader_pid)
            )
            figures["producer_cpu_s"] = round(own_cpu_seconds() - own_before, 3)
            figures["load_average_after"] = load_average()
            figures["problems"] = check()
            runs[listener].append(figures)
            log(
                f"  listener round {r + 1}, {listener} to broker {leader}: "
                f"{figures['mb_per_s']:.1f} MB/s; producer CPU s {figures['producer_cpu_s']}, "
                f"leader's busiest threads {figures['leader_busiest_threads_cpu_s']}"
            )
    return {name: median_round(found) for name, found in runs.items()} | {"broker": leader}


# ----------------------------------------------------------------------------- disables


def single_phase(variants: dict[str, Variant], names: Sequence[str]) -> dict[str, Any]:
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu_before = {v: variants[v].cpu() for v in VARIANTS}
    for i, name in enumerate(names):
        for variant in alternating(variants, i):
            samples[variant.name].append(
                disable_and_wait(variant.cluster.admin, name, RETAIN_DISABLE)
            )
    return {
        v: {
            **summarize(samples[v]),
            "samples_s": samples[v],
            # both clusters' processes ran during the whole phase, each only for its own disables
            "cpu_s": variants[v].used_since(cpu_before[v]),
        }
        for v in VARIANTS
    } | {"load_average_after": load_average()}


def batched_phase(
    variants: dict[str, Variant], names: Sequence[str], args: argparse.Namespace, log: Log
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for variant in (variants[v] for v in VARIANTS):
        for other in variants.values():
            other.wait_idle(log)
        cpu_before = variant.cpu()
        figures = batched_disable(variant.cluster.admin, names, RETAIN_DISABLE)
        figures["cpu_s"] = variant.used_since(cpu_before)
        figures["load_average_after"] = load_average()
        result[variant.name] = figures
        log(
            f"  {variant.name}: {len(names)} topics DISABLED in {figures['seconds']:.2f} s "
            f"(the alter answered after {figures['alter_answered_s']:.2f} s); CPU s "
            f"{figures['cpu_s']}"
        )
    return result


# ----------------------------------------------------------------------------- the run


def run(args: argparse.Namespace, workdir: Path, log: Log) -> tuple[dict[str, Any], list[str]]:
    results: dict[str, Any] = {}
    failures: list[str] = []
    identities = issue_identities(workdir / "certificates", list(range(1, args.brokers + 1)))
    variants = make_variants(workdir, identities, args.brokers, args.idle_window_s)
    try:
        for variant in variants.values():
            results.setdefault("cluster_start_s", {})[variant.name] = variant.start()
        results["acls"] = grant_clients(variants["secure"].cluster, identities)
        failures += refusals(variants["secure"].cluster)
        log(f"clusters up: {results['cluster_start_s']}; {results['acls']} ACLs granted")
        for variant in variants.values():
            partition, _, _ = produce_topic(variant, f"{TOPIC_PREFIX}probe")
            waited = wait_producer_accepted(variant, partition.name)
            log(f"  {variant.name}: the producer was accepted after {waited:.1f} s")

        if "produce" in args.phases:
            workload = build_workload(int(args.size_mb * MIB))
            results["workload"] = {
                "records": workload.records,
                "value_bytes": workload.value_bytes,
            }
            results["produce"] = produce_phase(variants, workload, args.rounds, log)
            failures += [p for v in VARIANTS for p in results["produce"][v]["problems"]]

        if "listener" in args.phases:
            workload = build_workload(int(args.size_mb * MIB))
            results["listener"] = listener_phase(
                variants["plaintext"], identities, workload, args.listener_rounds, log
            )
            failures += [p for name in LISTENERS for p in results["listener"][name]["problems"]]

        single = [f"{TOPIC_PREFIX}single-{i:03d}" for i in range(args.repeat)]
        if "single" not in args.phases:
            single = []
        else:
            for variant in variants.values():
                assert variant.processes is not None
                make_topics(
                    variant.cluster, single, args.latency_partitions, variant.processes, log
                )
            results["single"] = single_phase(variants, single)
            log(
                "  one disable (median): "
                + ", ".join(
                    f"{v} {format_seconds(results['single'][v]['median_s'])}" for v in VARIANTS
                )
            )

        names = [f"{TOPIC_PREFIX}topic-{i:05d}" for i in range(args.topics)]
        if "batched" not in args.phases:
            names = []
        else:
            results["setup"] = {}
            for variant in variants.values():
                assert variant.processes is not None
                results["setup"][variant.name] = make_topics(
                    variant.cluster, names, args.partitions, variant.processes, log
                )
            results["batched"] = batched_phase(variants, names, args, log)

        for variant in variants.values():
            hosted = log_dirs(variant.cluster)
            found = verify(variant.cluster, single + names, hosted, TieredState.DISABLED, 1)
            failures += [f"{variant.name}: {f}" for f in found]
        log(f"verified: {'ok' if not failures else f'{len(failures)} FAILURES'}")
    except Exception:
        failures.append(f"crashed:\n{traceback.format_exc()}")
        log(f"CRASHED:\n{traceback.format_exc()}")
        for variant in variants.values():
            log(variant.cluster.dump_logs()[-10_000:])
    finally:
        for variant in variants.values():
            variant.cluster.close()
    return results, failures


# ----------------------------------------------------------------------------- summary


def ratios(results: dict[str, Any]) -> dict[str, float]:
    """secure / plaintext for each figure measured."""
    found = {}
    if "single" in results:
        found["one_disable"] = (
            results["single"]["secure"]["median_s"] / results["single"]["plaintext"]["median_s"]
        )
    if "batched" in results:
        found["all_at_once"] = (
            results["batched"]["secure"]["seconds"] / results["batched"]["plaintext"]["seconds"]
        )
    if "produce" in results:
        found["produce"] = (
            results["produce"]["secure"]["mb_per_s"] / results["produce"]["plaintext"]["mb_per_s"]
        )
    if "listener" in results:
        found["produce_ssl_listener"] = (
            results["listener"]["SSL"]["mb_per_s"] / results["listener"]["PLAINTEXT"]["mb_per_s"]
        )
    return found


def goals_met(found: dict[str, float]) -> dict[str, bool]:
    return {
        k: v >= GOALS["produce"] if k.startswith("produce") else v <= GOALS["disable"]
        for k, v in found.items()
    }


def summary_rows(results: dict[str, Any], args: argparse.Namespace) -> list[Any]:
    baseline = "plaintext: the same cluster without TLS, SASL or authorizer"
    rows = []
    cluster = f"KRaft, {args.brokers} brokers"
    if "single" in results:
        rows.append(
            summary_row(
                f"{cluster}: one disable (retain policy), {args.latency_partitions} partitions",
                f"secure: alter to DISABLED seen (median; goal <= {GOALS['disable']})",
                results["single"]["secure"]["median_s"],
                "s",
                baseline,
                results["single"]["plaintext"]["median_s"],
            )
        )
    if "batched" in results:
        rows.append(
            summary_row(
                f"{cluster}: {args.topics:,} topics x {args.partitions} partitions disabled at "
                "once (retain policy)",
                f"secure: until every topic is DISABLED (goal <= {GOALS['disable']})",
                results["batched"]["secure"]["seconds"],
                "s",
                baseline,
                results["batched"]["plaintext"]["seconds"],
            )
        )
    if "produce" in results:
        rows.append(
            summary_row(
                f"{cluster}: Kafka produce, {args.size_mb:g} MiB of 1 KiB records "
                "(confluent-kafka)",
                "secure: SASL_SSL SCRAM-SHA-512, non-super user with ACLs, MB/s (ratio: share "
                f"of the baseline's MB/s, goal >= {GOALS['produce']})",
                results["produce"]["secure"]["mb_per_s"],
                "MB/s",
                "plaintext: PLAINTEXT listener, no authorizer",
                results["produce"]["plaintext"]["mb_per_s"],
            )
        )
        rows += cpu_rows(results["produce"], cluster, args.size_mb)
    if "listener" in results:
        rows.append(
            summary_row(
                f"{cluster}: Kafka produce to one broker, {args.size_mb:g} MiB of 1 KiB records "
                "(confluent-kafka)",
                "SSL listener, client certificate, no SASL or authorizer, MB/s (median of "
                f"{args.listener_rounds} rounds; ratio: share of the baseline's MB/s, goal >= "
                f"{GOALS['produce']})",
                results["listener"]["SSL"]["mb_per_s"],
                "MB/s",
                f"PLAINTEXT listener of the same broker, same run (median of "
                f"{args.listener_rounds} rounds)",
                results["listener"]["PLAINTEXT"]["mb_per_s"],
            )
        )
    return rows


def brokers_cpu_s(figures: dict[str, Any]) -> float:
    return float(sum(v for k, v in figures["cpu_s"].items() if k.startswith("broker-")))


def cpu_rows(produce: dict[str, Any], cluster: str, size_mb: float) -> list[Any]:
    """Where the produce's CPU goes, client and brokers apart: the two share the machine's CPUs,
    so when those are the bottleneck the MB/s ratio follows the CPU seconds' inverse."""
    scenario = f"{cluster}: Kafka produce, {size_mb:g} MiB of 1 KiB records (confluent-kafka)"
    baseline = "plaintext: PLAINTEXT listener, no authorizer"
    secure, plaintext = produce["secure"], produce["plaintext"]
    return [
        summary_row(
            scenario,
            "secure: the brokers' CPU seconds (the median round)",
            brokers_cpu_s(secure),
            "s",
            baseline,
            brokers_cpu_s(plaintext),
        ),
        summary_row(
            scenario,
            "secure: the producer's CPU seconds, librdkafka's threads included (the median round)",
            secure["producer_cpu_s"],
            "s",
            baseline,
            plaintext["producer_cpu_s"],
        ),
    ]


def print_table(results: dict[str, Any], log: Log) -> None:
    found = ratios(results)
    met = goals_met(found)
    rows: list[list[object]] = []
    for key, phase, figure in (
        ("one_disable", "single", "median_s"),
        ("all_at_once", "batched", "seconds"),
    ):
        if key in found:
            rows.append(
                [
                    key,
                    format_seconds(results[phase]["plaintext"][figure]),
                    format_seconds(results[phase]["secure"][figure]),
                    f"{found[key]:.2f}",
                    "yes" if met[key] else "NO",
                ]
            )
    if "produce" in found:
        rows.append(
            [
                "produce MB/s",
                f"{results['produce']['plaintext']['mb_per_s']:.1f}",
                f"{results['produce']['secure']['mb_per_s']:.1f}",
                f"{found['produce']:.2f}",
                "yes" if met["produce"] else "NO",
            ]
        )
    if "produce_ssl_listener" in found:
        rows.append(
            [
                "produce MB/s, one broker: PLAINTEXT vs SSL listener",
                f"{results['listener']['PLAINTEXT']['mb_per_s']:.1f}",
                f"{results['listener']['SSL']['mb_per_s']:.1f}",
                f"{found['produce_ssl_listener']:.2f}",
                "yes" if met["produce_ssl_listener"] else "NO",
            ]
        )
    if rows:
        log(format_table(["figure", "plaintext", "secure", "ratio", "goal met"], rows))


# ----------------------------------------------------------------------------- main


def phase_list(text: str) -> tuple[str, ...]:
    phases = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in phases if p not in PHASES]
    if unknown or not phases:
        raise argparse.ArgumentTypeError(
            f"--phases {text!r}: valid values are a comma list of {', '.join(PHASES)}"
        )
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, help="topics disabled at once (default 1000)")
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--repeat", type=int, help="single disables per cluster (20)")
    parser.add_argument("--latency-partitions", type=int, default=3)
    parser.add_argument("--size-mb", type=float, help="MiB produced per round (256)")
    parser.add_argument("--rounds", type=int, help="produce rounds per cluster (3)")
    parser.add_argument(
        "--listener-rounds", type=int, default=5, help="produce rounds per listener (5)"
    )
    parser.add_argument(
        "--idle-window-s",
        type=float,
        default=IDLE_WINDOW_S,
        help=f"before a disable phase, each process under {IDLE_MAX_RATE * 100:g}%% of a CPU "
        f"over this long (default {IDLE_WINDOW_S:g})",
    )
    parser.add_argument("--quick", action="store_true", help=f"small sizes: {QUICK}")
    parser.add_argument(
        "--phases",
        type=phase_list,
        default=PHASES,
        help=f"a comma list of the phases to run, of {', '.join(PHASES)} (default: all)",
    )
    parser.add_argument("--workdir", type=Path, help="where the clusters' directories go")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    args.topics = args.topics or (QUICK["topics"] if args.quick else 1000)
    args.repeat = args.repeat or (QUICK["repeat"] if args.quick else 20)
    args.size_mb = args.size_mb or (QUICK["size_mb"] if args.quick else 256)
    args.rounds = args.rounds or (QUICK["rounds"] if args.quick else 3)
    sizes = (
        args.topics,
        args.partitions,
        args.brokers,
        args.repeat,
        args.rounds,
        args.listener_rounds,
    )
    if min(*sizes, args.latency_partitions) < 1 or min(args.size_mb, args.idle_window_s) <= 0:
        parser.error(
            "--topics, --partitions, --brokers, --repeat, --rounds, --listener-rounds, "
            "--latency-partitions, --size-mb and --idle-window-s must be positive"
        )

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {name: code_fingerprint(name) for name in ("tiered", "controller", "broker")}
    open_files = raise_open_files_limit(
        math.ceil(
            (args.topics * args.partitions + args.repeat * args.latency_partitions) / args.brokers
        )
    )
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="security-cost-", dir=args.workdir))
    try:
        results, failures = run(args, workdir, log)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    runtime_s = time.perf_counter() - started
    found = ratios(results)
    document = {
        "benchmark": "security_cost",
        "description": (
            "The same work on a secure cluster (gRPC mutual TLS between every process, the "
            "authorizer on with the bench's clients as non-super users holding ACLs, Kafka over "
            "SASL_SSL SCRAM-SHA-512) and on a plaintext one, both up at once, alternating, in "
            "one run: one disable, --topics topics disabled at once, Kafka produce MB/s; and "
            "on one broker of the plaintext cluster, produce MB/s through its SSL listener "
            "against its PLAINTEXT one. ratio = secure / plaintext, SSL / PLAINTEXT (goals: "
            "disables <= 1.3, produce >= 0.7)."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "settings": {
            "mode": "kraft",
            "topics": args.topics,
            "partitions": args.partitions,
            "brokers": args.brokers,
            "repeat": args.repeat,
            "latency_partitions": args.latency_partitions,
            "size_mb": args.size_mb,
            "rounds": args.rounds,
            "listener_rounds": args.listener_rounds,
            "idle_window_s": args.idle_window_s,
            "quick": args.quick,
            "phases": list(args.phases),
            "disable": RETAIN_DISABLE,
            "controller": CONTROLLER_DEFAULTS,
            "broker": BROKER_EXTRA,
            "open_files_limit": open_files,
        },
        "results": results,
        "ratios": found,
        "goals": GOALS,
        "goals_met": goals_met(found),
        "summary": summary_rows(results, args),
        "failures": failures,
        "ok": not failures,
    }
    return finish_run(
        args.out, document, runtime_s, failures, lambda: print_table(results, log), log
    )


if __name__ == "__main__":
    sys.exit(main())
