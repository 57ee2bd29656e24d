"""Disabling tiered storage on many topics in one request, against one topic at a time; many
clients disabling at once, against one after another; and one disable against the floor of the
work it must do. Every baseline and floor is measured in the same run, on a real cluster.

Setup, per metadata mode (``--modes``, default ``kraft,zookeeper``): a real cluster as the
integration tests run it (``tests.support.cluster.Cluster``: an active controller, a standby and
``--brokers`` brokers, each a separate process; in ZooKeeper mode a ZooKeeper server of its own,
``forceSync=yes`` as in production, while the KRaft-style log fsyncs every append). Controllers
run with the product's defaults for session and request timeouts and retry backoff, plus
``metrics.port=0`` (their Prometheus endpoint, for the group-commit flush sizes); brokers with
``remote.log.manager.task.interval.ms=30000`` so that idle partitions do not burn CPU. Topics are
created with ``remote.storage.enable=true`` and no records: a disable needs none (each broker
still leads the partition for tiering and stops it at the new tiered epoch). After every creation
the bench waits until each broker hosts every partition and the processes are idle again (each
under 15% of a CPU over ``--idle-window-s``, 2 s, from ``/proc``; the brokers' periodic tiering
tasks stay).

Waiting for DISABLED is never polled: before its alter, the bench opens a watch on the topics
(``AdminClient.watch_topics``, the WatchTopics stream: their descriptions now and after each
change), whose first answer must show every one ENABLED; a topic counts as DISABLED at the first
answer that shows it so, timed when this process reads that answer (``watch_timeline`` in the
JSON: what each answer of the clients' and the batched watch showed, and when). Only where the
controller refuses the watch of the batched phase (``MAX_WATCHES``, 16, open at once) does that
phase fall back to describing the topics every 10 ms (``watch_refused`` in the JSON says so).

Measured, per mode, in this order (medians of ``--repeat`` (20) for the floors and singles):

1. *floor_single*, what one disable cannot do without: the controller persists DISABLING, the
   broker persists its stop, the controller persists DISABLED, and the alter and the
   DisableRemoteTopic are a round trip each. floor_single = 2 x *write* + *broker write* + 2 x
   *round trip*, where *write* is, in KRaft mode, an fdatasync'd append (to a file beside the
   metadata log) of a topic's update records as the metadata log frames them (the topic's
   ConfigRecord and TieredStateRecord, ``serde.topic_update_records``, sized only), and in
   ZooKeeper mode a kazoo multi of the 3 ``set_data`` a topic update writes
   (``znodes.topic_update_ops``: config, tiered state, tiered epoch; the same data, on copies of
   those znodes under a bench prefix of the same server); *broker write* is an fdatasync'd
   append, in the brokers' log-dir filesystem, of k assignment-journal entries of the median size
   found in the brokers' ``assignments.journal`` after the topics were created (their
   ``assignments.json`` if compacted), k the most partitions of the topic on one broker; *round
   trip* is a gRPC ``ListOffsets`` of one partition to a broker. The earlier floor stays in the
   JSON for comparison: ``floor_s`` = one 200-byte fdatasync'd append (KRaft) or a multi of two
   small ``set_data`` (ZooKeeper) + one round trip.
2. *single disable, small cluster*: ``--repeat`` topics of ``--latency-partitions`` (3)
   partitions disabled one after another: the time from the ``IncrementalAlterConfigs`` call to
   the watch's answer showing the topic DISABLED (the watch opened before, not timed).
3. *clients at once*: ``--clients`` (100) topics of 1 partition, created in the setup;
   ``--clients`` threads, each with its own ``AdminClient`` (already connected to the active
   controller), wait at a barrier and then each disables its own topic with
   ``IncrementalAlterConfigs``. Time from the barrier to the answer of one watch over all those
   topics (opened before the barrier; its answers are read by a thread of its own) showing every
   one DISABLED. Baseline (*sequential*): the same topics re-enabled (one ``AlterTopicConfigs``;
   the bench waits until every broker copies them again and the cluster is idle), then disabled
   one after another as in 2; its seconds are the sum of the per-topic times.
4. ``--topics`` (1000) topics of ``--partitions`` (10) partitions are created, and the single
   disable is measured again on another ``--repeat`` topics (*single disable, loaded cluster*).
5. *floor_batched*: 2 x the write of all those topics' change (KRaft: one fdatasync'd append of
   their framed update records; ZooKeeper: multis of 3 ``set_data`` a topic,
   ``UPDATE_TOPICS_PER_MULTI`` (200) topics a multi, one after another) + one round trip + the
   broker write of the journal entries of the largest broker's partitions (one
   DisableRemoteTopic per broker; the brokers work in parallel).
6. *batched*: every one of the ``--topics`` topics disabled in one ``AlterTopicConfigs`` request
   (``incremental_alter_topics``), from the moment it is sent to the answer of one watch over all
   of them (one WatchTopics of ``--topics`` names, opened before) that shows every one DISABLED.
7. The same topics are re-enabled (one ``AlterTopicConfigs``; DISABLED -> ENABLED keeps tiered
   epoch 1; the bench waits until every broker copies every partition again and the cluster is
   idle). Disabling again raises the epoch to 2 and costs what the first disable did: the same
   partitions on the same brokers.
8. *unbatched* (the baseline of 6): the same topics disabled one at a time as in 2, each waiting
   for DISABLED before the next alter; its seconds are the sum of the per-topic times (each
   watch's opening left out; ``wall_s`` has them in). When the first ``--baseline-sample`` (100)
   topics project the whole set beyond ``--baseline-budget-s`` (600 s), it stops there and the
   figure is extrapolated linearly to ``--topics`` (``extrapolated`` in the JSON says so).

The controller's ``kafka_controller_kafkacontroller_topicwriteflushsize`` histogram (topic changes
persisted by each group-commit write), read from the active controller's metrics endpoint before
and after phases 3 (both halves) and 6, gives the flush sizes of each (the difference).

With ``--profile``, py-spy samples the active controller and every broker during the clients,
batched and unbatched phases (summarised in the JSON: the functions with the most samples, on
top of the stack and anywhere on it, and per thread entry point; py-spy costs CPU, so a profiled
phase is marked ``profiled``). Each phase records the CPU seconds each process used (the bench's
own, its client threads and watch included, as ``bench``) and the load average after it: other
work on the machine skews these figures.

Brokers inherit the bench's open-files limit, raised to what they need (each hosted partition
keeps 3 files open); the run stops at once if it cannot be.

Every topic disabled is checked after each phase: DISABLED at the expected tiered epoch (1 after
the first disable, 2 after the second) with ``remote.storage.enable=false`` in the controller, and
on its broker (``DescribeLogDirs``) every partition at that epoch, not copying (topics the
baseline did not reach: ENABLED at epoch 1, copying). Any mismatch, or an alter that fails,
exits 1. Timings are never asserted.

Ratios (as ``bench.common.summary_row``: value / baseline) and the targets of issue 29, recorded
under ``targets`` in the JSON, met or not: single median / floor_single <= 2; batched /
floor_batched <= 3; batched / unbatched <= 0.1 (ten times as fast); clients at once, topics/s /
sequential topics/s >= 5.

Usage: ``python bench/disable_throughput.py [--quick] [--topics 1000] [--partitions 10]
[--brokers 3] [--clients 100] [--modes kraft,zookeeper] [--repeat 20] [--baseline-sample 100]
[--baseline-budget-s 600] [--idle-window-s 2] [--profile] [--skip-baseline] [--workdir DIR]
[--out PATH]`` (results default to ``bench/results/disable_throughput.json``; ``--quick`` is 50
topics, 20 clients, a sample of 20 and 10 repeats).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    finish_run,
    format_bytes,
    format_seconds,
    format_table,
    load_average,
    machine_info,
    process_cpu_seconds,
    summarize,
    summary_row,
    utc_now,
)
from controller.store.kraft_log.frames import HEADER_SIZE
from controller.store.zookeeper.writes import UPDATE_TOPICS_PER_MULTI
from controller.store.zookeeper.znodes import topic_update_ops
from tests.support.cluster import Cluster
from tests.support.zookeeper import ZooKeeperServer, start_kazoo_client
from tiered.admin import AdminClient, TopicDescription, WatchRefusedError
from tiered.cluster import serde
from tiered.cluster.model import TieredState, TopicMetadata
from tiered.errors import TieredError
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import metadata_pb2, records_pb2

DEFAULT_OUT = RESULTS_DIR / "disable_throughput.json"
MODES = ("kraft", "zookeeper")
TIERED = {"remote.storage.enable": "true"}
DISABLE = {"remote.storage.enable": "false"}
QUICK = {"topics": 50, "baseline_sample": 20, "repeat": 10, "clients": 20}
# The product's defaults (tests.support.cluster shortens them for test speed; a loaded 2-CPU
# machine would fence brokers or time requests out under the test values).
CONTROLLER_DEFAULTS = {
    "broker.session.timeout.ms": "9000",
    "controller.retry.backoff.ms": "100",
    "controller.retry.backoff.max.ms": "10000",
    "controller.request.timeout.ms": "30000",
}
ZOOKEEPER_CONTROLLER_DEFAULTS = {
    "zookeeper.session.timeout.ms": "6000",
    "zookeeper.suspended.grace.ms": "2000",
}
CONTROLLER_METRICS = {"metrics.port": "0"}  # any free port, announced on the controller's stdout
BROKER_EXTRA = {"remote.log.manager.task.interval.ms": "30000"}
CREATE_THREADS = 4
IDLE_WINDOW_S = 2.0  # a process counts as idle when under IDLE_MAX_RATE of a CPU over it
IDLE_MAX_RATE = 0.15
DISABLE_TIMEOUT_S = 300.0  # a disable still DISABLING after this fails the run
WATCH_REFUSED_POLL_S = 0.010  # the batched phase's describe polling if its watch is refused
FLUSH_SIZE_METRIC = "kafka_controller_kafkacontroller_topicwriteflushsize"
TARGETS = {  # issue 29
    "single_vs_floor": 2.0,  # single median / floor_single, at most
    "batched_vs_floor": 3.0,  # batched / floor_batched, at most
    "batched_vs_unbatched": 0.1,  # batched s / unbatched s, at most
    "clients_throughput": 5.0,  # concurrent topics/s / sequential topics/s, at least
}

FDS_PER_PARTITION = 3  # a hosted partition keeps its segment, offset index and time index open
IDLE_LEAVES = (  # py-spy leaf frames of threads that wait (its idle detection misses some)
    "_worker (futures/thread.py)",
    "Condition.wait (threading.py)",
    "Event.wait (threading.py)",
    "_serve (grpc/_server.py)",
    "_UnaryUnaryMultiCallable._blocking (grpc/_channel.py)",
    "_next (grpc/_channel.py)",
    "select (selectors.py)",
    "_loop (rlm/scheduler.py)",
)

# The frame after the last of these is what a thread (or a pool's work item) runs.
ENTRY_CALLERS = ("Thread.run (threading.py)", "_WorkItem.run (futures/thread.py)")

Log = Callable[[str], None]


def raise_open_files_limit(partitions_per_broker: int) -> dict[str, int]:
    """Brokers inherit this process's RLIMIT_NOFILE; each hosted partition holds
    ``FDS_PER_PARTITION`` files open (Kafka's guidance is a limit of 100,000 or more). Raised to
    what the largest broker needs (the hard limit too when permitted, e.g. as root)."""
    needed = partitions_per_broker * FDS_PER_PARTITION + 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
            except (ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        else:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        raise SystemExit(
            f"brokers need about {needed} open files (RLIMIT_NOFILE is {soft}, hard {hard}): "
            "raise the limit (ulimit -n) or use fewer topics or partitions"
        )
    return {"needed": needed, "soft": soft, "hard": hard}


# ----------------------------------------------------------------------------- processes


class Processes:
    """The pids of a running bench cluster, by role, and their CPU time."""

    def __init__(
        self,
        cluster: Cluster,
        zookeeper: ZooKeeperServer | None,
        idle_window_s: float = IDLE_WINDOW_S,
    ) -> None:
        self.idle_window_s = idle_window_s
        active = cluster.active_controller()
        assert active.process is not None
        self.pids: dict[str, int] = {"controller": active.process.pid}
        for broker_id, broker in sorted(cluster.brokers.items()):
            assert broker.process is not None
            self.pids[f"broker-{broker_id}"] = broker.process.pid
        if zookeeper is not None and zookeeper.pid is not None:
            self.pids["zookeeper"] = zookeeper.pid

    def cpu(self) -> dict[str, float]:
        return {name: process_cpu_seconds(pid) for name, pid in self.pids.items()}

    def python_pids(self) -> dict[str, int]:
        """The controller and the brokers (what py-spy can sample)."""
        return {name: pid for name, pid in self.pids.items() if name != "zookeeper"}

    @staticmethod
    def used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {name: round(after[name] - before[name], 3) for name in before}

    def wait_idle(self, log: Log, max_rate: float = IDLE_MAX_RATE, timeout_s: float = 300) -> float:
        """Waits until each process uses under ``max_rate`` of a CPU over ``idle_window_s``: the
        previous phase's work is done (what stays is the brokers' periodic tiering tasks, ~0.07
        of a CPU each with 3,000+ idle partitions); returns the seconds waited."""
        window_s = self.idle_window_s
        start = time.monotonic()
        previous = self.cpu()
        while time.monotonic() - start < timeout_s:
            time.sleep(window_s)
            now = self.cpu()
            if all(now[k] - previous[k] < max_rate * window_s for k in now):
                return time.monotonic() - start
            previous = now
        log(f"  (the cluster was still busy after {timeout_s:.0f} s; going on)")
        return time.monotonic() - start


# ----------------------------------------------------------------------------- topics


def create_topics(admin: AdminClient, names: Sequence[str], partitions: int) -> None:
    def create(name: str) -> None:
        admin.create_topic(name, partitions, TIERED)

    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(create, names))


def log_dirs(cluster: Cluster) -> dict[tuple[uuid.UUID, int], pb.PartitionLogDir]:
    """Every partition every broker hosts."""
    found: dict[tuple[uuid.UUID, int], pb.PartitionLogDir] = {}
    for broker_id in cluster.brokers:
        response = cluster.broker_stub(broker_id).DescribeLogDirs(
            pb.DescribeLogDirsRequest(), timeout=60
        )
        for d in response.partitions:
            found[(uuid.UUID(bytes=d.partition.topic_id), d.partition.partition)] = d
    return found


def wait_hosted(cluster: Cluster, topics: Sequence[TopicDescription], timeout_s: float) -> None:
    """Until each broker hosts every partition of ``topics`` (tiering on)."""
    wanted = {(t.topic_id, p) for t in topics for p in range(len(t.partitions))}
    deadline = time.monotonic() + timeout_s
    while True:
        begin = time.monotonic()
        hosted = log_dirs(cluster)
        missing = [k for k in wanted if k not in hosted or not hosted[k].copying]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(missing)} partitions not hosted after {timeout_s:.0f} s")
        # DescribeLogDirs reads every partition's remote log state: leave the brokers be.
        time.sleep(max(0.5, 3 * (time.monotonic() - begin)))


def make_topics(
    cluster: Cluster, names: Sequence[str], partitions: int, processes: Processes, log: Log
) -> dict[str, Any]:
    begin = time.perf_counter()
    create_topics(cluster.admin, names, partitions)
    created = time.perf_counter() - begin
    topics = cluster.admin.describe_topics(names, include_partition_state=False)
    wait_hosted(cluster, topics, timeout_s=600 + 0.1 * len(names) * partitions)
    hosted = time.perf_counter() - begin
    idle = processes.wait_idle(log)
    log(
        f"  created {len(names)} topics x {partitions} partitions: {created:.1f} s, hosted "
        f"after {hosted:.1f} s, idle after {idle:.1f} s more"
    )
    return {"topics": len(names), "create_s": created, "hosted_s": hosted, "idle_wait_s": idle}


# ----------------------------------------------------------------------------- watching


class TopicWatch:
    """A watch over ``names`` (``AdminClient.watch_topics``), opened at once: its first answer
    must show every topic ENABLED. With ``poll_s``, a watch the controller refuses
    (``WatchRefusedError``) becomes describe polling every ``poll_s`` (``refused`` says why);
    without, the refusal is raised."""

    def __init__(
        self,
        admin: AdminClient,
        names: Sequence[str],
        timeout_s: float,
        poll_s: float | None = None,
    ) -> None:
        self._admin = admin
        self.names = list(names)
        self._deadline = time.perf_counter() + timeout_s
        self._poll_s = poll_s
        self.refused: str | None = None
        self.answers = 0  # read after the first
        # Per answer read: (perf_counter, topics DISABLING, topics DISABLED, broker acks owed).
        self.timeline: list[tuple[float, int, int, int]] = []
        self._watch: Iterator[list[TopicDescription]] | None = admin.watch_topics(
            self.names, timeout_s
        )
        self._thread: threading.Thread | None = None
        self._outcome: dict[str, Any] = {}
        try:
            first = next(self._watch)
        except WatchRefusedError as e:
            self._watch = None
            if poll_s is None:
                raise
            self.refused = str(e)
            first = self._describe()
        except BaseException:
            self.close()
            raise
        wrong = [t for t in first if t.tiered_state is not TieredState.ENABLED]
        if wrong:
            self.close()
            raise RuntimeError(
                f"{len(wrong)} topics not ENABLED before the disable, e.g. {wrong[0].name}: "
                f"{wrong[0].tiered_state.value}"
            )

    def _describe(self) -> list[TopicDescription]:
        return self._admin.describe_topics(self.names, include_partition_state=False)

    def _next(self) -> list[TopicDescription]:
        if self._watch is not None:
            return next(self._watch)
        assert self._poll_s is not None
        time.sleep(self._poll_s)
        return self._describe()

    def wait_disabled(self) -> dict[str, float]:
        """Reads answers until every topic was shown DISABLED; returns, per topic, the
        ``time.perf_counter()`` at which the first answer showing it DISABLED was read."""
        pending = set(self.names)
        seen: dict[str, float] = {}
        while pending:
            try:
                topics = self._next()
            except StopIteration:
                raise RuntimeError("the watch ended before every topic was DISABLED") from None
            now = time.perf_counter()
            self.answers += 1
            states = collections.Counter(t.tiered_state for t in topics)
            owed = sum(t.disable_acks_owed for t in topics)
            self.timeline.append(
                (now, states[TieredState.DISABLING], states[TieredState.DISABLED], owed)
            )
            for topic in topics:
                if topic.name not in pending:
                    continue
                if topic.tiered_state is TieredState.DISABLED:  # else ENABLED or DISABLING
                    seen[topic.name] = now
                    pending.discard(topic.name)
            if pending and now > self._deadline:
                raise RuntimeError(f"{len(pending)} topics not DISABLED after the deadline")
        return seen

    def start(self) -> None:
        """``wait_disabled`` on a thread of its own (``result`` collects it): its answers are
        read, and timed, while this thread sends the alters."""

        def run() -> None:
            try:
                self._outcome["seen"] = self.wait_disabled()
            except BaseException as e:  # handed to result()
                self._outcome["error"] = e

        self._thread = threading.Thread(target=run, name="watch", daemon=True)
        self._thread.start()

    def result(self, failed: Callable[[], str | None]) -> dict[str, float]:
        """What the started ``wait_disabled`` returned; raises at once if ``failed()`` says an
        alter failed (the watch would never see its topic DISABLED)."""
        assert self._thread is not None
        while self._thread.is_alive():
            self._thread.join(0.05)
            why = failed()
            if why is not None:
                raise RuntimeError(why)
        if "error" in self._outcome:
            raise self._outcome["error"]
        seen: dict[str, float] = self._outcome["seen"]
        return seen

    def close(self) -> None:
        """Ends the watch (its slot in the controller is freed) unless its thread still reads
        it (a failed phase: the thread is a daemon and the cluster closes)."""
        if isinstance(self._watch, Generator) and (
            self._thread is None or not self._thread.is_alive()
        ):
            self._watch.close()
        self._watch = None


# ----------------------------------------------------------------------------- disabling


def check_alter(name: str, result: object) -> str | None:
    """Why an alter's result is not a disable under way, or None."""
    if isinstance(result, TieredError):
        return f"{name}: alter failed: {result}"
    state = getattr(result, "tiered_state", None)
    if state not in (TieredState.DISABLING, TieredState.DISABLED):
        return f"{name}: alter answered {state}"
    return None


def disable_and_wait(admin: AdminClient, name: str, configs: Mapping[str, str] = DISABLE) -> float:
    """One disable (the alter of ``configs``) as a client that waits for it does: a watch on the
    topic (not timed), then the alter; seconds from the alter to the watch's answer showing
    DISABLED."""
    watch = TopicWatch(admin, [name], DISABLE_TIMEOUT_S)
    try:
        begin = time.perf_counter()
        problem = check_alter(name, admin.incremental_alter_configs(name, dict(configs)))
        if problem is not None:
            raise RuntimeError(problem)
        return watch.wait_disabled()[name] - begin
    finally:
        watch.close()


def single_disables(admin: AdminClient, names: Sequence[str]) -> dict[str, Any]:
    samples = [disable_and_wait(admin, name) for name in names]
    return {**summarize(samples), "samples_s": samples, "load_average_after": load_average()}


def seen_figures(watch: TopicWatch, seen: Mapping[str, float], begin: float) -> dict[str, Any]:
    """When the watch saw the topics DISABLED (seconds from ``begin``), and what each of its
    answers showed (``watch_timeline``: at most the last 100 answers)."""
    times = sorted(t - begin for t in seen.values())
    return {
        "seconds": times[-1],
        "topics_per_s": len(times) / times[-1],
        "first_disabled_s": times[0],
        "half_disabled_s": times[len(times) // 2],
        "watch_answers": watch.answers,
        "watch_timeline": [
            {"s": t - begin, "disabling": ing, "disabled": ed, "broker_acks_owed": owed}
            for t, ing, ed, owed in watch.timeline[-100:]
        ],
    }


def batched_disable(
    admin: AdminClient, names: Sequence[str], configs: Mapping[str, str] = DISABLE
) -> dict[str, Any]:
    """Every topic disabled (the alter of ``configs``) in one ``AlterTopicConfigs`` request;
    returns when one watch over all of them has shown each DISABLED."""
    watch = TopicWatch(
        admin, names, DISABLE_TIMEOUT_S + 0.1 * len(names), poll_s=WATCH_REFUSED_POLL_S
    )
    try:
        watch.start()
        begin = time.perf_counter()
        try:
            results: Sequence[object] = admin.incremental_alter_topics(names, configs)
        except Exception as e:
            raise RuntimeError(f"batched disable: the request failed: {e}") from e
        answered = time.perf_counter() - begin
        errors = [p for n, r in zip(names, results, strict=True) if (p := check_alter(n, r))]
        if errors:
            raise RuntimeError(f"batched disable: {errors[0]} ({len(errors)} errors)")
        seen = watch.result(lambda: None)
    finally:
        watch.close()
    return {
        "topics": len(names),
        **seen_figures(watch, seen, begin),
        "alter_answered_s": answered,
        "watch_refused": watch.refused,
        "poll_interval_s": WATCH_REFUSED_POLL_S if watch.refused else None,
    }


def unbatched_disable(
    admin: AdminClient, names: Sequence[str], sample: int, budget_s: float, log: Log
) -> dict[str, Any]:
    """One topic at a time; stops after ``sample`` topics when the whole set would take longer
    than ``budget_s`` and extrapolates linearly. Seconds: the sum of the per-topic times."""
    samples: list[float] = []
    begin = time.perf_counter()
    for i, name in enumerate(names):
        samples.append(disable_and_wait(admin, name))
        if i + 1 == sample and sample < len(names):
            elapsed = time.perf_counter() - begin
            projected = elapsed / sample * len(names)
            if projected > budget_s:
                log(
                    f"  unbatched: {sample} topics took {elapsed:.1f} s; the whole set would "
                    f"take ~{projected:.0f} s > {budget_s:.0f} s: extrapolating"
                )
                break
            log(
                f"  unbatched: {sample} topics took {elapsed:.1f} s; ~{projected:.0f} s for all: "
                "going on"
            )
    wall = time.perf_counter() - begin
    measured = sum(samples)
    extrapolated = len(samples) < len(names)
    seconds = measured / len(samples) * len(names) if extrapolated else measured
    return {
        "topics": len(names),
        "measured_topics": len(samples),
        "measured_s": measured,
        "wall_s": wall,
        "extrapolated": extrapolated,
        "seconds": seconds,
        "topics_per_s": len(names) / seconds,
        "per_topic": summarize(samples),
    }


def concurrent_disables(cluster: Cluster, names: Sequence[str]) -> dict[str, Any]:
    """One client (thread and ``AdminClient``) per topic; all disable at once, after a
    barrier; until one watch over the topics has shown each DISABLED."""
    watch = TopicWatch(cluster.admin, names, DISABLE_TIMEOUT_S + 0.1 * len(names))
    clients = [AdminClient(cluster.bootstrap, timeout_s=60) for _ in names]
    begin = [0.0]
    barrier = threading.Barrier(
        len(names) + 1, action=lambda: begin.__setitem__(0, time.perf_counter())
    )
    answered: dict[str, float] = {}
    errors: list[str] = []

    def client(admin: AdminClient, name: str) -> None:
        try:
            admin.describe_cluster()  # finds the active controller and connects to it
            barrier.wait(timeout=120)
        except Exception as e:
            errors.append(f"{name}: before the barrier: {e!r}")
            barrier.abort()
            return
        try:
            result = admin.incremental_alter_configs(name, dict(DISABLE))
            answered[name] = time.perf_counter()
            problem = check_alter(name, result)
        except Exception as e:
            problem = f"{name}: alter failed: {e}"
        if problem is not None:
            errors.append(problem)

    threads = [
        threading.Thread(target=client, args=(c, n), name=f"client-{n}", daemon=True)
        for c, n in zip(clients, names, strict=True)
    ]
    try:
        watch.start()
        for thread in threads:
            thread.start()
        barrier.wait(timeout=120)
        seen = watch.result(lambda: errors[0] if errors else None)
        for thread in threads:
            thread.join(60)
        if errors:
            raise RuntimeError(f"clients at once: {errors[0]} ({len(errors)} errors)")
    finally:
        watch.close()
        for admin in clients:
            admin.close()
    alters = sorted(t - begin[0] for t in answered.values())
    return {
        "topics": len(names),
        "clients": len(names),
        **seen_figures(watch, seen, begin[0]),
        "alters_answered_s": summarize(alters),
    }


def reenable(
    cluster: Cluster, names: Sequence[str], processes: Processes, log: Log
) -> dict[str, Any]:
    """Turns tiering back on for every topic (one request; DISABLED -> ENABLED, epoch
    unchanged) and waits until each broker copies every partition again and the cluster is
    idle."""
    begin = time.perf_counter()
    results = cluster.admin.incremental_alter_topics(names, TIERED)
    for name, result in zip(names, results, strict=True):
        if isinstance(result, TieredError):
            raise RuntimeError(f"{name}: re-enable failed: {result}")
        if result.tiered_state is not TieredState.ENABLED:
            raise RuntimeError(f"{name}: re-enable answered {result.tiered_state.value}")
    topics = cluster.admin.describe_topics(names, include_partition_state=False)
    wait_hosted(cluster, topics, timeout_s=600)
    seconds = time.perf_counter() - begin
    idle = processes.wait_idle(log)
    log(f"  re-enabled {len(names)} topics: copying again after {seconds:.1f} s")
    return {"topics": len(names), "seconds": seconds, "idle_wait_s": idle}


# ----------------------------------------------------------------------------- flush sizes


def metrics_url(cluster: Cluster) -> str | None:
    """The active controller's Prometheus endpoint, as it announced it (None: it has none)."""
    for line in cluster.active_controller().output_since_start():
        found = re.search(r"metrics on (http://\S+)", line)
        if found:
            return found.group(1)
    return None


def flush_histogram(url: str | None) -> dict[str, float] | None:
    """The flush-size histogram's cumulative buckets (``le`` -> count), ``count`` and ``sum``."""
    if url is None:
        return None
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(FLUSH_SIZE_METRIC + "_"):
            continue
        name, _, value = line.rpartition(" ")
        if name.startswith(FLUSH_SIZE_METRIC + "_bucket"):
            le = re.search(r'le="([^"]+)"', name)
            if le:
                found[le.group(1)] = float(value)
        elif name.split("{")[0] in (FLUSH_SIZE_METRIC + "_count", FLUSH_SIZE_METRIC + "_sum"):
            found[name.split("{")[0].rsplit("_", 1)[1]] = float(value)
    return found or None


def flush_sizes(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> dict[str, Any] | None:
    """The flushes between two readings: how many, of how many topic changes in all, and how
    many of each size range (``"<= 10"``: more than the previous bound, at most 10)."""
    if before is None or after is None:
        return None
    count = after["count"] - before.get("count", 0)
    total = after["sum"] - before.get("sum", 0)
    bounds = sorted((k for k in after if k not in ("count", "sum")), key=float)
    ranges: dict[str, int] = {}
    previous = 0.0
    for le in bounds:
        cumulative = after[le] - before.get(le, 0)
        if cumulative > previous:
            label = "more" if le == "+Inf" else f"<= {float(le):g}"
            ranges[label] = int(cumulative - previous)
        previous = cumulative
    return {
        "flushes": int(count),
        "changes": int(total),
        "mean_changes_per_flush": total / count if count else None,
        "flushes_by_size": ranges,
    }


# ----------------------------------------------------------------------------- floor


def grpc_round_trips(cluster: Cluster, topic: TopicDescription, repeat: int) -> list[float]:
    leader = topic.partitions[0].leader
    stub = cluster.broker_stub(leader)
    request = pb.ListOffsetsRequest(
        partition=records_pb2.TopicIdPartition(
            topic_id=topic.topic_id.bytes, topic=topic.name, partition=0
        )
    )
    samples = []
    for i in range(repeat + 3):  # 3 warm-up calls: the channel connects on the first
        begin = time.perf_counter()
        response = stub.ListOffsets(request, timeout=10)
        elapsed = time.perf_counter() - begin
        if response.error.code != 0:
            raise RuntimeError(f"ListOffsets failed: {response.error}")
        if i >= 3:
            samples.append(elapsed)
    return samples


def zookeeper_multis(connect: str, repeat: int) -> list[float]:
    """The earlier floor's write: a multi of two small ``set_data``."""
    client = start_kazoo_client(connect)
    try:
        base = f"/disable-throughput-floor-{uuid.uuid4().hex[:8]}"
        a, b = f"{base}/a", f"{base}/b"
        client.ensure_path(a)
        client.ensure_path(b)
        samples = []
        for i in range(repeat + 3):
            transaction = client.transaction()
            transaction.set_data(a, f"state-{i}".encode())
            transaction.set_data(b, str(i).encode())
            begin = time.perf_counter()
            results = transaction.commit()
            elapsed = time.perf_counter() - begin
            if any(isinstance(r, Exception) for r in results):
                raise RuntimeError(f"ZooKeeper multi failed: {results}")
            if i >= 3:
                samples.append(elapsed)
        client.delete(base, recursive=True)
        return samples
    finally:
        client.stop()
        client.close()


def _multi(client: Any, ops: Sequence[tuple[str, str, bytes]]) -> None:
    """One kazoo transaction of ``("create" | "set" | "delete", path, data)``."""
    transaction = client.transaction()
    for kind, path, data in ops:
        if kind == "create":
            transaction.create(path, data)
        elif kind == "set":
            transaction.set_data(path, data)
        else:
            transaction.delete(path)
    results = transaction.commit()
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise RuntimeError(f"ZooKeeper multi of {len(ops)} ops failed: {failed[0]!r}")


def zookeeper_topic_writes(
    connect: str, topics: Sequence[TopicMetadata], per_multi: int, repeat: int
) -> tuple[list[float], int]:
    """The ZooKeeper write of ``topics``' changes as the controller makes it: multis of the
    3 ``set_data`` of ``topic_update_ops`` a topic, ``per_multi`` topics a multi, one after
    another; on copies of those znodes (the same paths under a prefix, the same data). Returns
    the seconds of each whole write and the bytes of data it sets."""
    base = f"/disable-throughput-floor-{uuid.uuid4().hex[:8]}"
    groups = [
        [
            ("set", base + path, data)
            for t in topics[i : i + per_multi]
            for _, path, data in topic_update_ops(t)
        ]
        for i in range(0, len(topics), per_multi)
    ]
    nodes: dict[str, bytes] = {}
    for group in groups:
        for _, path, data in group:
            parent = path.rsplit("/", 1)[0]
            while parent != base and parent not in nodes:
                nodes[parent] = b""
                parent = parent.rsplit("/", 1)[0]
            nodes[path] = data
    ordered = sorted(nodes, key=lambda p: p.count("/"))
    client = start_kazoo_client(connect)
    try:
        client.ensure_path(base)
        for i in range(0, len(ordered), 1000):
            _multi(client, [("create", p, nodes[p]) for p in ordered[i : i + 1000]])
        samples = []
        for i in range(repeat + 3):
            begin = time.perf_counter()
            for group in groups:
                _multi(client, group)
            elapsed = time.perf_counter() - begin
            if i >= 3:
                samples.append(elapsed)
        deepest_first = ordered[::-1]
        for i in range(0, len(deepest_first), 1000):
            _multi(client, [("delete", p, b"") for p in deepest_first[i : i + 1000]])
        client.delete(base)
        return samples, sum(len(data) for group in groups for _, _, data in group)
    finally:
        client.stop()
        client.close()


def fsync_appends(directory: Path, size: int, repeat: int) -> list[float]:
    """Appends of ``size`` bytes to a file of ``directory``, each fdatasync'd, as the metadata
    log appends a batch and a broker its assignment-journal entries."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"floor-append-{size}.log"
    sync = getattr(os, "fdatasync", os.fsync)
    record = os.urandom(max(1, size))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    samples = []
    try:
        for i in range(repeat + 3):
            begin = time.perf_counter()
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view) :]
            sync(fd)
            elapsed = time.perf_counter() - begin
            if i >= 3:
                samples.append(elapsed)
    finally:
        os.close(fd)
        path.unlink()
    return samples


def disabling(topic: TopicDescription) -> TopicMetadata:
    """The topic as a disable writes it (DISABLING, ``remote.storage.enable=false``): what the
    floors size their writes on."""
    return TopicMetadata(
        name=topic.name,
        topic_id=topic.topic_id,
        replicas=tuple(p.leader for p in topic.partitions),
        configs={**topic.configs, **DISABLE},
        tiered_state=TieredState.DISABLING,
        tiered_epoch=topic.tiered_epoch + 1,
    )


def kraft_batch_bytes(topics: Sequence[TopicMetadata]) -> int:
    """The size of the metadata log's frame of ``topics``' update records (one batch)."""
    records = [r for t in topics for r in serde.topic_update_records(t)]
    batch = metadata_pb2.MetadataRecordBatch(base_offset=1_000_000, records=records)
    return HEADER_SIZE + len(batch.SerializeToString())


def journal_entries(cluster: Cluster) -> dict[str, Any]:
    """The size of the brokers' assignment-journal entries (a line and its newline), from their
    ``assignments.journal``, or their ``assignments.json`` where the journal was compacted."""
    sizes: list[int] = []
    source = "assignments.journal"
    log_dirs_ = [Path(b.properties["log.dirs"]) for b in cluster.brokers.values()]
    for log_dir in log_dirs_:
        journal = log_dir / "assignments.journal"
        if journal.exists():
            for line in journal.read_bytes().splitlines():
                if line.strip() and not line.startswith(b'{"remove"'):
                    sizes.append(len(line) + 1)
    if not sizes:
        source = "assignments.json"
        for log_dir in log_dirs_:
            snapshot = log_dir / "assignments.json"
            if snapshot.exists():
                for entry in json.loads(snapshot.read_bytes()):
                    sizes.append(len(json.dumps(entry, separators=(",", ":"))) + 1)
    if not sizes:
        raise RuntimeError("no assignment-journal entry found in the brokers' log dirs")
    return {
        "median_bytes": statistics.median(sizes),
        "min_bytes": min(sizes),
        "max_bytes": max(sizes),
        "entries": len(sizes),
        "source": source,
    }


def most_partitions_on_a_broker(topics: Sequence[TopicDescription]) -> int:
    hosted = collections.Counter(p.leader for t in topics for p in t.partitions)
    return max(hosted.values())


def broker_floor_dir(cluster: Cluster) -> tuple[Path, bool]:
    """Where the broker writes are measured (beside the brokers' log dirs), and whether that is
    the brokers' filesystem."""
    directory = cluster.root / "floor-broker"
    directory.mkdir(parents=True, exist_ok=True)
    log_dir = Path(next(iter(cluster.brokers.values())).properties["log.dirs"])
    return directory, directory.stat().st_dev == log_dir.stat().st_dev


def controller_write(
    mode: str,
    cluster: Cluster,
    zookeeper: ZooKeeperServer | None,
    topics: Sequence[TopicMetadata],
    repeat: int,
) -> dict[str, Any]:
    """The controller's durable write of ``topics``' changes, in ``mode``."""
    if mode == "zookeeper":
        assert zookeeper is not None
        samples, size = zookeeper_topic_writes(
            zookeeper.connect_string, topics, UPDATE_TOPICS_PER_MULTI, repeat
        )
        multis = math.ceil(len(topics) / UPDATE_TOPICS_PER_MULTI)
        what = (
            f"{multis} kazoo multi(s) of 3 set_data a topic ({len(topics)} topics, "
            f"{UPDATE_TOPICS_PER_MULTI} a multi), one after another"
        )
    else:
        size = kraft_batch_bytes(topics)
        samples = fsync_appends(cluster.root / "floor", size, repeat)
        what = f"fdatasync'd append of {len(topics)} topics' update records beside the metadata log"
    return {**summarize(samples), "what": what, "bytes": size}


def broker_write(
    cluster: Cluster, entries: Mapping[str, Any], partitions: int, repeat: int
) -> dict[str, Any]:
    directory, same = broker_floor_dir(cluster)
    size = int(partitions * entries["median_bytes"])
    samples = fsync_appends(directory, size, repeat)
    return {
        **summarize(samples),
        "what": f"fdatasync'd append of {partitions} journal entries in the log dirs' filesystem",
        "bytes": size,
        "partitions": partitions,
        "same_filesystem_as_log_dirs": same,
    }


def measure_floor_single(
    mode: str,
    cluster: Cluster,
    zookeeper: ZooKeeperServer | None,
    topic: TopicDescription,
    repeat: int,
) -> dict[str, Any]:
    """floor_single (and the earlier floor_s) for a disable of ``topic``."""
    entries = journal_entries(cluster)
    write = controller_write(mode, cluster, zookeeper, [disabling(topic)], repeat)
    broker = broker_write(cluster, entries, most_partitions_on_a_broker([topic]), repeat)
    rpc = grpc_round_trips(cluster, topic, repeat)
    if mode == "zookeeper":
        assert zookeeper is not None
        old = zookeeper_multis(zookeeper.connect_string, repeat)
        old_what = "ZooKeeper multi of 2 set_data (kazoo transaction)"
    else:
        old = fsync_appends(cluster.root / "floor", 200, repeat)
        old_what = "fdatasync'd append of a 200-byte record beside the metadata log"
    w, b = write["median_s"], broker["median_s"]
    r, o = statistics.median(rpc), statistics.median(old)
    return {
        "write": write,
        "broker_write": broker,
        "rpc": {**summarize(rpc), "what": "gRPC ListOffsets round trip to a broker"},
        "journal_entries": entries,
        "floor_single_s": 2 * w + b + 2 * r,
        "floor_single_formula": "2 x write + broker_write + 2 x rpc (medians)",
        "earlier_write": {**summarize(old), "what": old_what},
        "floor_s": o + r,
        "floor_two_writes_s": 2 * o + r,
    }


def measure_floor_batched(
    mode: str,
    cluster: Cluster,
    zookeeper: ZooKeeperServer | None,
    topics: Sequence[TopicDescription],
    repeat: int,
) -> dict[str, Any]:
    """floor_batched for a disable of every one of ``topics`` at once."""
    entries = journal_entries(cluster)
    write = controller_write(mode, cluster, zookeeper, [disabling(t) for t in topics], repeat)
    broker = broker_write(cluster, entries, most_partitions_on_a_broker(topics), repeat)
    rpc = grpc_round_trips(cluster, topics[0], repeat)
    r = statistics.median(rpc)
    return {
        "topics": len(topics),
        "write": write,
        "broker_write": broker,
        "rpc": {**summarize(rpc), "what": "gRPC ListOffsets round trip to a broker"},
        "journal_entries": entries,
        "floor_batched_s": 2 * write["median_s"] + broker["median_s"] + r,
        "floor_batched_formula": "2 x write + broker_write + rpc (medians)",
    }


# ----------------------------------------------------------------------------- verification


def verify(
    cluster: Cluster,
    names: Sequence[str],
    hosted: dict[tuple[uuid.UUID, int], pb.PartitionLogDir],
    state: TieredState,
    epoch: int,
) -> list[str]:
    """Each topic is in ``state`` at ``epoch`` with the matching ``remote.storage.enable`` in the
    controller, and its broker reports each partition at that epoch, copying only if ENABLED."""
    if not names:
        return []
    enabled = state is TieredState.ENABLED
    failures = []
    for topic in cluster.admin.describe_topics(names, include_partition_state=False):
        if (
            topic.tiered_state is not state
            or topic.tiered_epoch != epoch
            or topic.configs.get("remote.storage.enable") != str(enabled).lower()
        ):
            failures.append(
                f"{topic.name}: {topic.tiered_state.value} epoch {topic.tiered_epoch} configs "
                f"{topic.configs}, expected {state.value} epoch {epoch}"
            )
            continue
        for p in range(len(topic.partitions)):
            d = hosted.get((topic.topic_id, p))
            if d is None:
                failures.append(f"{topic.name}-{p}: not hosted by any broker")
            elif d.tiered_epoch != epoch or d.copying != enabled:
                failures.append(
                    f"{topic.name}-{p}: broker reports tiered epoch {d.tiered_epoch}, copying "
                    f"{d.copying}; expected epoch {epoch}, copying {enabled}"
                )
    return failures


# ----------------------------------------------------------------------------- profile


class Profiler:
    """py-spy record on some processes (non-blocking sampling), stopped with SIGINT."""

    def __init__(self, pids: dict[str, int], directory: Path, phase: str, rate: int) -> None:
        self.files = {name: directory / f"pyspy-{phase}-{name}.txt" for name in pids}
        exe = Path(sys.executable).with_name("py-spy")
        self.command = str(exe) if exe.exists() else shutil.which("py-spy")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        if self.command is None:
            return
        for name, pid in pids.items():
            self.processes[name] = subprocess.Popen(
                [
                    self.command,
                    "record",
                    "--pid",
                    str(pid),
                    "--rate",
                    str(rate),
                    "--nonblocking",
                    "--format",
                    "raw",
                    "--output",
                    str(self.files[name]),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        time.sleep(1.0)  # py-spy attaches

    def stop(self) -> dict[str, Any]:
        if self.command is None:
            return {"error": "py-spy is not installed (pip install py-spy)"}
        summaries: dict[str, Any] = {}
        for process in self.processes.values():
            process.send_signal(signal.SIGINT)
        for name, process in self.processes.items():
            try:
                _, stderr = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                _, stderr = process.communicate()
            path = self.files[name]
            if not path.exists():
                summaries[name] = {"error": stderr.decode(errors="replace")[-500:]}
                continue
            summaries[name] = summarize_profile(path.read_text().splitlines())
        return summaries


def _frame_name(frame: str) -> str:
    """``function (path/to/file.py:123)`` -> ``function (file.py)``: lines vary, functions not."""
    function, _, where = frame.partition(" (")
    location = where.rstrip(")").rsplit(":", 1)[0]
    parts = location.split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 else location
    return f"{function} ({short})"


def summarize_profile(lines: Iterable[str], top: int = 15) -> dict[str, Any]:
    """Collapsed stacks (``frame;frame;... count``, root first) -> the functions with the most
    samples on top of the stack (self) and anywhere on it (inclusive), and per thread entry point
    (the function a thread runs). Samples whose leaf is a wait (``IDLE_LEAVES``) are dropped."""
    idle = 0
    self_counts: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in lines:
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        named = [_frame_name(f) for f in stack.split(";")]
        if named[-1] in IDLE_LEAVES:
            idle += count
            continue
        total += count
        starts = [i for i, name in enumerate(named) if name in ENTRY_CALLERS]
        entry = named[starts[-1] + 1] if starts and starts[-1] + 1 < len(named) else named[0]
        threads[entry] += count
        self_counts[named[-1]] += count
        for name in set(named):
            inclusive[name] += count

    def share(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [
            {"function": name, "samples": n, "share": round(n / total, 3)}
            for name, n in counter.most_common(top)
        ]

    return {
        "samples": total,
        "idle_samples_dropped": idle,
        "self": share(self_counts),
        "inclusive": share(inclusive),
        "thread_entry_points": share(threads),
    }


# ----------------------------------------------------------------------------- one mode


def run_mode(mode: str, args: argparse.Namespace, workdir: Path, log: Log) -> dict[str, Any]:
    root = workdir / mode
    root.mkdir(parents=True)
    zookeeper = None
    controller_extra = {**CONTROLLER_DEFAULTS, **CONTROLLER_METRICS}
    if mode == "zookeeper":
        zookeeper = ZooKeeperServer(root / "zookeeper", force_sync=True)
        zookeeper.start()
        controller_extra.update(ZOOKEEPER_CONTROLLER_DEFAULTS)
    cluster = Cluster(
        root,
        mode,
        zookeeper.connect_string if zookeeper is not None else None,
        brokers=args.brokers,
        controller_extra=controller_extra,
        broker_extra=dict(BROKER_EXTRA),
    )
    result: dict[str, Any] = {"mode": mode, "failures": []}
    failures: list[str] = result["failures"]
    try:
        begin = time.perf_counter()
        cluster.start()
        processes = Processes(cluster, zookeeper, args.idle_window_s)
        result["cluster_start_s"] = time.perf_counter() - begin
        log(f"[{mode}] cluster up in {result['cluster_start_s']:.1f} s ({processes.pids})")
        admin = cluster.admin
        url = result["metrics_endpoint"] = metrics_url(cluster)
        if url is None:
            log(f"[{mode}] the active controller has no metrics endpoint: no flush sizes")
        small = [f"single-small-{i:03d}" for i in range(args.repeat)]
        loaded = [f"single-loaded-{i:03d}" for i in range(args.repeat)]
        clients = [f"client-{i:03d}" for i in range(args.clients)]
        names = [f"topic-{i:05d}" for i in range(args.topics)]

        def profiled(
            phase: str, run: Callable[[], dict[str, Any]], profile: bool = True
        ) -> dict[str, Any]:
            """Runs a phase; adds the CPU each process used, the load average after it, the
            controller's group-commit flush sizes during it and, with --profile, py-spy's
            summary."""
            profiler = None
            if args.profile and profile:
                profiler = Profiler(processes.python_pids(), root, phase, args.profile_rate)
            flushes_before = flush_histogram(url)
            cpu_before, bench_before = processes.cpu(), time.process_time()
            figures = run()
            figures["cpu_s"] = Processes.used(cpu_before, processes.cpu())
            figures["cpu_s"]["bench"] = round(time.process_time() - bench_before, 3)
            figures["load_average_after"] = load_average()
            figures["flush_sizes"] = flush_sizes(flushes_before, flush_histogram(url))
            if profiler is not None:
                figures["profiled"] = True
                result.setdefault("profile", {})[phase] = profiler.stop()
            return figures

        result["setup"] = {
            "single": make_topics(cluster, small + loaded, args.latency_partitions, processes, log),
            "clients": make_topics(cluster, clients, 1, processes, log),
        }
        first = admin.describe_topic(small[0], include_partition_state=False)
        floor = result["floor"] = measure_floor_single(mode, cluster, zookeeper, first, args.repeat)
        log(
            f"[{mode}] floor_single: 2 x write {format_seconds(floor['write']['median_s'])} "
            f"({format_bytes(floor['write']['bytes'])}) + broker write "
            f"{format_seconds(floor['broker_write']['median_s'])} "
            f"({format_bytes(floor['broker_write']['bytes'])}) + 2 x round trip "
            f"{format_seconds(floor['rpc']['median_s'])} = "
            f"{format_seconds(floor['floor_single_s'])} (earlier floor "
            f"{format_seconds(floor['floor_s'])})"
        )
        result["single_small"] = single_disables(admin, small)
        log(
            f"[{mode}] single disable, {args.repeat} topics x {args.latency_partitions} "
            f"partitions, small cluster: median "
            f"{format_seconds(result['single_small']['median_s'])}"
        )

        c = result["clients_concurrent"] = profiled(
            "clients", lambda: concurrent_disables(cluster, clients)
        )
        log(
            f"[{mode}] {args.clients} clients at once: all DISABLED in {c['seconds'] * 1e3:.1f} "
            f"ms ({c['topics_per_s']:.0f} topics/s); flushes {c['flush_sizes']}"
        )
        failures += verify(cluster, clients, log_dirs(cluster), TieredState.DISABLED, 1)
        if not failures:
            result["clients_reenable"] = reenable(cluster, clients, processes, log)

            def sequential() -> dict[str, Any]:
                single = single_disables(admin, clients)
                seconds = sum(single["samples_s"])
                return {
                    "topics": len(clients),
                    "seconds": seconds,
                    "topics_per_s": len(clients) / seconds,
                    "per_topic": single,
                }

            s = result["clients_sequential"] = profiled("clients_sequential", sequential, False)
            result["clients_ratio"] = c["topics_per_s"] / s["topics_per_s"]
            log(
                f"[{mode}] the same {args.clients} one after another: {s['seconds'] * 1e3:.1f} "
                f"ms ({s['topics_per_s']:.0f} topics/s): x{result['clients_ratio']:.1f}; "
                f"flushes {s['flush_sizes']}"
            )
            failures += verify(cluster, clients, log_dirs(cluster), TieredState.DISABLED, 2)

        result["setup"]["topics"] = make_topics(cluster, names, args.partitions, processes, log)
        result["single_loaded"] = single_disables(admin, loaded)
        log(
            f"[{mode}] single disable with {args.topics} topics x {args.partitions} "
            f"partitions hosted: median {format_seconds(result['single_loaded']['median_s'])}"
        )
        described = admin.describe_topics(names, include_partition_state=False)
        fb = result["floor_batched"] = measure_floor_batched(
            mode, cluster, zookeeper, described, args.repeat
        )
        log(
            f"[{mode}] floor_batched: 2 x write {format_seconds(fb['write']['median_s'])} "
            f"({format_bytes(fb['write']['bytes'])}) + broker write "
            f"{format_seconds(fb['broker_write']['median_s'])} "
            f"({format_bytes(fb['broker_write']['bytes'])}) + round trip "
            f"{format_seconds(fb['rpc']['median_s'])} = {format_seconds(fb['floor_batched_s'])}"
        )
        processes.wait_idle(log)

        b = result["batched"] = profiled("batched", lambda: batched_disable(admin, names))
        log(
            f"[{mode}] batched: {args.topics} topics DISABLED in {b['seconds']:.3f} s "
            f"({b['topics_per_s']:.0f} topics/s; the request answered after "
            f"{b['alter_answered_s']:.3f} s; {b['watch_answers']} watch answers): "
            f"{b['seconds'] / fb['floor_batched_s']:.1f} x floor; CPU s {b['cpu_s']}; "
            f"flushes {b['flush_sizes']}"
        )
        hosted = log_dirs(cluster)
        failures += verify(cluster, small + loaded + names, hosted, TieredState.DISABLED, 1)

        if not args.skip_baseline and not failures:
            result["reenable"] = reenable(cluster, names, processes, log)
            result["unbatched"] = profiled(
                "unbatched",
                lambda: unbatched_disable(
                    admin, names, args.baseline_sample, args.baseline_budget_s, log
                ),
            )
            u = result["unbatched"]
            log(
                f"[{mode}] unbatched: {u['measured_topics']} topics one at a time in "
                f"{u['measured_s']:.1f} s ({u['topics_per_s']:.1f} topics/s"
                f"{'; extrapolated to ' + str(args.topics) if u['extrapolated'] else ''}: "
                f"{u['seconds']:.1f} s); CPU s {u['cpu_s']}"
            )
            result["ratio"] = b["seconds"] / u["seconds"]
            measured = u["measured_topics"]
            hosted = log_dirs(cluster)
            failures += verify(cluster, names[:measured], hosted, TieredState.DISABLED, 2)
            failures += verify(cluster, names[measured:], hosted, TieredState.ENABLED, 1)
        log(f"[{mode}] verified: {'ok' if not failures else f'{len(failures)} FAILURES'}")
    except Exception:
        failures.append(f"{mode}: crashed:\n{traceback.format_exc()}")
        log(f"[{mode}] CRASHED:\n{traceback.format_exc()}")
        log(cluster.dump_logs()[-20_000:])
    finally:
        cluster.close()
        if zookeeper is not None:
            zookeeper.stop()
    result["targets"] = targets(result)
    return result


def targets(r: Mapping[str, Any]) -> dict[str, Any]:
    """Issue 29's targets: each ratio, its bound, and whether it was met (nothing asserted)."""
    found: dict[str, Any] = {}

    def at_most(key: str, ratio: float, bound: float) -> None:
        found[key] = {"ratio": ratio, "target": f"<= {bound:g}", "met": ratio <= bound}

    floor = r.get("floor", {}).get("floor_single_s")
    for key in ("single_small", "single_loaded"):
        if key in r and floor:
            at_most(
                f"{key}_vs_floor_single", r[key]["median_s"] / floor, TARGETS["single_vs_floor"]
            )
    if "batched" in r and "floor_batched" in r:
        ratio = r["batched"]["seconds"] / r["floor_batched"]["floor_batched_s"]
        at_most("batched_vs_floor_batched", ratio, TARGETS["batched_vs_floor"])
    if "batched" in r and "unbatched" in r:
        ratio = r["batched"]["seconds"] / r["unbatched"]["seconds"]
        at_most("batched_vs_unbatched", ratio, TARGETS["batched_vs_unbatched"])
    if "clients_ratio" in r:
        bound = TARGETS["clients_throughput"]
        ratio = r["clients_ratio"]
        found["clients_throughput"] = {
            "ratio": ratio,
            "target": f">= {bound:g}",
            "met": ratio >= bound,
        }
    return found


# ----------------------------------------------------------------------------- summary


def _write_name(mode: str, topics: int) -> str:
    """The controller's durable write of ``topics`` topics' change, as its floor measures it."""
    if mode == "zookeeper":
        if topics == 1:
            return "ZooKeeper multi of the topic's 3 set_data"
        return (
            f"ZooKeeper multis of 3 set_data a topic ({UPDATE_TOPICS_PER_MULTI} topics a multi) "
            f"for the {topics:,} topics"
        )
    if topics == 1:
        return "fdatasync'd append of the topic's update records"
    return f"fdatasync'd append of the {topics:,} topics' update records"


def summary_rows(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[Any]:
    rows = []
    for mode, r in results.items():
        size = f"{args.topics:,} topics x {args.partitions} partitions, {args.brokers} brokers"
        scenario = f"{mode}: disable {size}"
        if "batched" in r and "unbatched" in r:
            u = r["unbatched"]
            baseline = "one topic at a time, each waiting for DISABLED (sum" + (
                f"; measured on {u['measured_topics']}, extrapolated)" if u["extrapolated"] else ")"
            )
            rows.append(
                summary_row(
                    scenario,
                    "one AlterTopicConfigs, until a watch shows every topic DISABLED "
                    f"(goal: ratio <= {TARGETS['batched_vs_unbatched']:g})",
                    r["batched"]["seconds"],
                    "s",
                    baseline,
                    u["seconds"],
                )
            )
            rows.append(
                summary_row(
                    scenario,
                    "one AlterTopicConfigs: topics disabled per second",
                    r["batched"]["topics_per_s"],
                    "topics/s",
                    baseline,
                    u["topics_per_s"],
                )
            )
        if "batched" in r and "floor_batched" in r:
            rows.append(
                summary_row(
                    scenario,
                    "one AlterTopicConfigs, until a watch shows every topic DISABLED "
                    f"(goal: ratio <= {TARGETS['batched_vs_floor']:g})",
                    r["batched"]["seconds"],
                    "s",
                    f"floor_batched: 2 x {_write_name(mode, args.topics)} + "
                    "a broker's fdatasync'd journal append of its partitions + gRPC round trip "
                    "(medians)",
                    r["floor_batched"]["floor_batched_s"],
                )
            )
        if "clients_ratio" in r:
            c, s = r["clients_concurrent"], r["clients_sequential"]
            rows.append(
                summary_row(
                    f"{mode}: {c['clients']} clients, each disabling its own topic (1 partition)",
                    "all at once after a barrier, until a watch shows every topic DISABLED: "
                    "topics per second (ratio: times the baseline's topics/s, goal >= "
                    f"{TARGETS['clients_throughput']:g})",
                    c["topics_per_s"],
                    "topics/s",
                    "the same topics one after another, each waiting for DISABLED",
                    s["topics_per_s"],
                )
            )
        floor = r.get("floor")
        if floor is None:
            continue
        for key, where in (
            ("single_small", f"{args.latency_partitions} partitions, small cluster"),
            ("single_loaded", f"{args.latency_partitions} partitions, {size} hosted"),
        ):
            if key in r:
                rows.append(
                    summary_row(
                        f"{mode}: one disable, {where}",
                        "alter to DISABLED seen by a watch (median; goal: ratio <= "
                        f"{TARGETS['single_vs_floor']:g})",
                        r[key]["median_s"],
                        "s",
                        f"floor_single: 2 x {_write_name(mode, 1)} + a broker's fdatasync'd "
                        "journal append + 2 x gRPC round trip (medians)",
                        floor["floor_single_s"],
                    )
                )
    return rows


def print_table(results: dict[str, dict[str, Any]], log: Log) -> None:
    rows: list[list[object]] = []
    for mode, r in results.items():
        if "batched" in r:
            u = r.get("unbatched")
            fb = r["floor_batched"]["floor_batched_s"]
            rows.append(
                [
                    mode,
                    format_seconds(r["batched"]["seconds"]),
                    format_seconds(fb),
                    f"{r['batched']['seconds'] / fb:.1f}",
                    f"{u['seconds']:.1f} s{'*' if u['extrapolated'] else ''}" if u else "-",
                    f"{u['seconds'] / r['batched']['seconds']:.1f}" if u else "-",
                ]
            )
    if rows:
        headers = ["mode", "batched", "floor", "x floor", "unbatched", "x faster"]
        log(format_table(headers, rows))
        log("(* extrapolated from a sample)")
    rows = []
    for mode, r in results.items():
        if "floor" in r:
            for key in ("single_small", "single_loaded"):
                if key in r:
                    rows.append(
                        [
                            f"{mode} {key.removeprefix('single_')}",
                            format_seconds(r[key]["median_s"]),
                            format_seconds(r["floor"]["floor_single_s"]),
                            f"{r[key]['median_s'] / r['floor']['floor_single_s']:.1f}",
                            format_seconds(r["floor"]["floor_s"]),
                        ]
                    )
    if rows:
        log(format_table(["single disable", "median", "floor_single", "ratio", "floor_s"], rows))
    rows = []
    for mode, r in results.items():
        if "clients_ratio" in r:
            c, s = r["clients_concurrent"], r["clients_sequential"]
            mean = (c.get("flush_sizes") or {}).get("mean_changes_per_flush")
            rows.append(
                [
                    mode,
                    format_seconds(c["seconds"]),
                    f"{c['topics_per_s']:.0f}",
                    format_seconds(s["seconds"]),
                    f"{s['topics_per_s']:.0f}",
                    f"{r['clients_ratio']:.1f}",
                    f"{mean:.1f}" if mean is not None else "-",
                ]
            )
    if rows:
        headers = ["clients", "at once", "topics/s", "sequential", "topics/s", "ratio", "flush"]
        log(format_table(headers, rows))
    for mode, r in results.items():
        for key, t in r.get("targets", {}).items():
            log(
                f"{mode} {key}: {t['ratio']:.3g} (target {t['target']}): "
                f"{'met' if t['met'] else 'NOT MET'}"
            )


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, help="topics per set (default 1000)")
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--clients", type=int, help="clients disabling at once (default 100)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--repeat", type=int, help="single disables and floor samples (20)")
    parser.add_argument("--latency-partitions", type=int, default=3)
    parser.add_argument("--baseline-sample", type=int, help="topics before extrapolating (100)")
    parser.add_argument("--baseline-budget-s", type=float, default=600.0)
    parser.add_argument("--skip-baseline", action="store_true", help="no unbatched run")
    parser.add_argument(
        "--idle-window-s",
        type=float,
        default=IDLE_WINDOW_S,
        help=f"before a phase, each process under {IDLE_MAX_RATE * 100:g}%% of a CPU over this long "
        f"(default {IDLE_WINDOW_S:g})",
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the clients, batched and unbatched phases"
    )
    parser.add_argument("--profile-rate", type=int, default=100, help="py-spy samples/s")
    parser.add_argument("--quick", action="store_true", help=f"small sizes: {QUICK}")
    parser.add_argument("--workdir", type=Path, help="where the clusters' directories go")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    args.topics = args.topics or (QUICK["topics"] if args.quick else 1000)
    args.repeat = args.repeat or (QUICK["repeat"] if args.quick else 20)
    args.clients = args.clients or (QUICK["clients"] if args.quick else 100)
    args.baseline_sample = min(
        args.topics, args.baseline_sample or (QUICK["baseline_sample"] if args.quick else 100)
    )
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes takes a comma list of {', '.join(MODES)}")
    if min(args.topics, args.partitions, args.brokers, args.repeat, args.clients) < 1:
        parser.error("--topics, --partitions, --brokers, --repeat, --clients must be >= 1")
    if args.idle_window_s <= 0:
        parser.error("--idle-window-s must be positive")

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {name: code_fingerprint(name) for name in ("tiered", "controller", "broker")}
    results: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    partitions_per_broker = math.ceil(
        (args.topics * args.partitions + 2 * args.repeat * args.latency_partitions + args.clients)
        / args.brokers
    )
    open_files = raise_open_files_limit(partitions_per_broker)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="disable-throughput-", dir=args.workdir))
    try:
        for mode in modes:
            results[mode] = run_mode(mode, args, workdir, log)
            failures += results[mode]["failures"]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    runtime_s = time.perf_counter() - started
    document = {
        "benchmark": "disable_throughput",
        "description": (
            "Disabling tiered storage on --topics topics in one AlterTopicConfigs request, until "
            "one watch shows every topic DISABLED, against one topic at a time, each waiting "
            "for DISABLED (the baseline; extrapolated from a sample when too long) and against "
            "floor_batched (2 x the controller's durable write of all the topics' change + a "
            "broker's fdatasync'd journal append of its partitions + a gRPC round trip); "
            "--clients clients each disabling its own topic at once (a barrier) against the "
            "same topics one after another; one disable (alter to DISABLED seen by a watch) "
            "against floor_single (2 x the controller's durable write of one topic's change + "
            "a broker's journal append + 2 x a gRPC round trip). On a real multi-process "
            "cluster per metadata mode; every floor measured in the same run. ratio = value / "
            "baseline; issue 29's targets under each mode's 'targets'."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "settings": {
            "topics": args.topics,
            "partitions": args.partitions,
            "brokers": args.brokers,
            "clients": args.clients,
            "modes": modes,
            "repeat": args.repeat,
            "latency_partitions": args.latency_partitions,
            "baseline_sample": args.baseline_sample,
            "baseline_budget_s": args.baseline_budget_s,
            "skip_baseline": args.skip_baseline,
            "idle_window_s": args.idle_window_s,
            "profile": args.profile,
            "quick": args.quick,
            "controller": {**CONTROLLER_DEFAULTS, **CONTROLLER_METRICS},
            "broker": BROKER_EXTRA,
            "zookeeper": "forceSync=yes",
            "update_topics_per_multi": UPDATE_TOPICS_PER_MULTI,
            "watch_refused_poll_s": WATCH_REFUSED_POLL_S,
            "targets": TARGETS,
            "open_files_limit": open_files,
        },
        "results": results,
        "summary": summary_rows(results, args),
        "failures": failures,
        "ok": not failures,
    }
    return finish_run(
        args.out, document, runtime_s, failures, lambda: print_table(results, log), log
    )


if __name__ == "__main__":
    sys.exit(main())
