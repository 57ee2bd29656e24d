"""Disabling tiered storage on many topics at once, against one topic at a time, on a real cluster;
and how long one disable takes against the floor of the work it must do, measured in one run.

Setup, per metadata mode (``--modes``, default ``kraft,zookeeper``): a real cluster as the
integration tests run it (``tests.support.cluster.Cluster``: an active controller, a standby and
``--brokers`` brokers, each a separate process; in ZooKeeper mode a ZooKeeper server of its own,
``forceSync=yes`` as in production, while the KRaft-style log fsyncs every append). Controllers
run with the product's defaults for session and request timeouts and retry backoff; brokers with
``remote.log.manager.task.interval.ms=30000`` so that idle partitions do not burn CPU. Topics are
created with ``remote.storage.enable=true`` and no records: a disable needs none (each broker
still leads the partition for tiering and stops it at the new tiered epoch). After every creation
the bench waits until each broker hosts every partition and the processes are idle again (each
under 15% of a CPU over 2 s, from ``/proc``; the brokers' periodic tiering tasks stay).

Measured, per mode, in this order:

1. *floor*: the least a disable could cost, median of ``--repeat`` (20) each. ZooKeeper mode: a
   bare multi of two ``set_data`` on the same ZooKeeper server (kazoo transaction), KRaft mode: an
   fdatasync'd append of a small record to a file beside the metadata log (same filesystem); plus
   in both one gRPC round trip to a broker (``ListOffsets`` of one partition, the cheapest call).
   floor = median write + median round trip. (A disable persists twice, DISABLING and then
   DISABLED, so the true minimum is about one write more; ``floor_two_writes_s`` says it.)
2. *single disable, small cluster*: ``--repeat`` topics of ``--latency-partitions`` (3)
   partitions, the only topics in the cluster, disabled one after another: the time from the
   ``IncrementalAlterConfigs`` call to the first describe (``include_partition_state=false``,
   polled every ``--latency-poll-ms``, 2 ms) that shows DISABLED; median.
3. Then ``--topics`` (1000) topics of ``--partitions`` (10) partitions are created, and the single
   disable is measured again on another ``--repeat`` topics (*single disable, loaded cluster*:
   idle, but with every partition hosted).
4. *batched*: every one of the ``--topics`` disabled at once: ``--alter-threads`` (4) threads
   send ``remote.storage.enable=false`` for their share as fast as the controller answers, while
   this process describes the topics not yet DISABLED every ``--batch-poll-ms`` (100 ms: the
   resolution of the figure). Time from the first alter to the describe that shows the last one
   DISABLED.
5. The same topics are re-enabled (DISABLED -> ENABLED keeps tiered epoch 1; the bench waits
   until every broker copies every partition again and the cluster is idle). Disabling again is
   allowed and raises the epoch to 2, and costs what the first disable did: the same
   partitions on the same brokers, with the same number of hosted partitions (a second set of
   topics would double what each broker hosts, and its open files).
6. *unbatched* (the baseline): the same topics disabled one at a time, each waiting for DISABLED
   (polled as in 2) before the next alter. When the first ``--baseline-sample`` (100) topics
   project the whole set beyond ``--baseline-budget-s`` (600 s), it stops there and the figure is
   extrapolated linearly to ``--topics`` (``extrapolated`` in the JSON says so).

With ``--profile``, py-spy samples the active controller and every broker during the batched and
the unbatched phase (summarised in the JSON: the functions with the most samples, on top of the
stack and anywhere on it, and per thread entry point; py-spy costs CPU, so a profiled phase is
marked ``profiled``). Each phase records the CPU seconds each process used and the load average
after it: other work on the machine skews these figures.

Brokers inherit the bench's open-files limit, raised to what they need (each hosted partition
keeps 3 files open); the run stops at once if it cannot be.

Every topic disabled is checked after each phase: DISABLED at the expected tiered epoch (1 after
the first disable, 2 after the second) with ``remote.storage.enable=false`` in the controller, and
on its broker (``DescribeLogDirs``) every partition at that epoch, not copying (topics the
baseline did not reach: ENABLED at epoch 1, copying). Any mismatch, or an alter that fails,
exits 1. Timings are never asserted.

ratio (batched) = batched seconds / unbatched seconds for the same number of topics (below 1:
disabling all at once is faster; topics/s is the inverse view). ratio (single) = median single
disable / floor (how many times the floor one disable takes).

Usage: ``python bench/disable_throughput.py [--quick] [--topics 1000] [--partitions 10]
[--brokers 3] [--modes kraft,zookeeper] [--repeat 20] [--baseline-sample 100]
[--baseline-budget-s 600] [--profile] [--skip-baseline] [--workdir DIR] [--out PATH]`` (results
default to ``bench/results/disable_throughput.json``; ``--quick`` is 50 topics, a sample of 20
and 10 repeats).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
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
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
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
    process_cpu_seconds,
    summarize,
    summary_row,
    utc_now,
)
from tests.support.cluster import Cluster
from tests.support.zookeeper import ZooKeeperServer, start_kazoo_client
from tiered.admin import AdminClient, TopicDescription
from tiered.cluster.model import TieredState
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import records_pb2

DEFAULT_OUT = RESULTS_DIR / "disable_throughput.json"
MODES = ("kraft", "zookeeper")
TIERED = {"remote.storage.enable": "true"}
DISABLE = {"remote.storage.enable": "false"}
QUICK = {"topics": 50, "baseline_sample": 20, "repeat": 10}
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
BROKER_EXTRA = {"remote.log.manager.task.interval.ms": "30000"}
CREATE_THREADS = 4
DISABLE_TIMEOUT_S = 300.0  # a disable still DISABLING after this fails the run

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

    def __init__(self, cluster: Cluster, zookeeper: ZooKeeperServer | None) -> None:
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

    def wait_idle(
        self, log: Log, window_s: float = 2.0, max_rate: float = 0.15, timeout_s: float = 300
    ) -> float:
        """Waits until each process uses under ``max_rate`` of a CPU over a window: the previous
        phase's work is done (what stays is the brokers' periodic tiering tasks, ~0.07 of a CPU
        each with 3,000+ idle partitions); returns the seconds waited."""
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


# ----------------------------------------------------------------------------- disabling


def disable_and_wait(
    admin: AdminClient, name: str, poll_s: float, configs: Mapping[str, str] = DISABLE
) -> float:
    """One disable (the alter of ``configs``), the unbatched way: alter, then poll describe
    until DISABLED. Seconds."""
    begin = time.perf_counter()
    result = admin.incremental_alter_configs(name, dict(configs))
    if result.tiered_state is not TieredState.DISABLED:
        if result.tiered_state is not TieredState.DISABLING:
            raise RuntimeError(f"{name}: alter answered {result.tiered_state.value}")
        while True:
            topic = admin.describe_topic(name, include_partition_state=False)
            if topic.tiered_state is TieredState.DISABLED:
                break
            if topic.tiered_state is not TieredState.DISABLING:
                raise RuntimeError(f"{name}: went {topic.tiered_state.value} while disabling")
            if time.perf_counter() - begin > DISABLE_TIMEOUT_S:
                raise RuntimeError(f"{name}: still DISABLING after {DISABLE_TIMEOUT_S:.0f} s")
            time.sleep(poll_s)
    return time.perf_counter() - begin


def single_disables(
    admin: AdminClient, names: Sequence[str], poll_s: float, configs: Mapping[str, str] = DISABLE
) -> dict[str, Any]:
    samples = [disable_and_wait(admin, name, poll_s, configs) for name in names]
    return {**summarize(samples), "samples_s": samples, "load_average_after": load_average()}


def batched_disable(
    admin: AdminClient,
    names: Sequence[str],
    threads: int,
    poll_s: float,
    configs: Mapping[str, str] = DISABLE,
) -> dict[str, Any]:
    """Every topic disabled at once (the alter of ``configs``); returns when each was seen
    DISABLED."""
    chunks = [names[i::threads] for i in range(threads)]
    alters_done: list[float] = []
    errors: list[str] = []
    begin = time.perf_counter()

    def send(chunk: Sequence[str]) -> None:
        for name in chunk:
            try:
                result = admin.incremental_alter_configs(name, dict(configs))
                if result.tiered_state not in (TieredState.DISABLING, TieredState.DISABLED):
                    errors.append(f"{name}: alter answered {result.tiered_state.value}")
            except Exception as e:
                errors.append(f"{name}: alter failed: {e}")
        alters_done.append(time.perf_counter() - begin)

    senders = [threading.Thread(target=send, args=(c,), daemon=True) for c in chunks]
    for sender in senders:
        sender.start()
    pending = set(names)
    done_at: dict[str, float] = {}
    polls = 0
    deadline = DISABLE_TIMEOUT_S + len(names)
    while pending:
        time.sleep(poll_s)
        if errors:
            break
        if time.perf_counter() - begin > deadline:
            errors.append(f"{len(pending)} topics not DISABLED after {deadline:.0f} s")
            break
        polls += 1
        now = time.perf_counter() - begin
        for topic in admin.describe_topics(sorted(pending), include_partition_state=False):
            if topic.tiered_state is TieredState.DISABLED:
                done_at[topic.name] = now
                pending.discard(topic.name)
    for sender in senders:
        sender.join()
    if errors:
        raise RuntimeError(f"batched disable failed: {errors[0]} ({len(errors)} errors)")
    seconds = max(done_at.values())
    halves = sorted(done_at.values())
    return {
        "topics": len(names),
        "seconds": seconds,
        "topics_per_s": len(names) / seconds,
        "alters_done_s": max(alters_done),
        "first_disabled_s": halves[0],
        "half_disabled_s": halves[len(halves) // 2],
        "polls": polls,
        "poll_interval_s": poll_s,
        "alter_threads": threads,
    }


def unbatched_disable(
    admin: AdminClient,
    names: Sequence[str],
    poll_s: float,
    sample: int,
    budget_s: float,
    log: Log,
) -> dict[str, Any]:
    """One topic at a time; stops after ``sample`` topics when the whole set would take longer
    than ``budget_s`` and extrapolates linearly."""
    samples: list[float] = []
    begin = time.perf_counter()
    projected = None
    for i, name in enumerate(names):
        samples.append(disable_and_wait(admin, name, poll_s))
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
    measured = time.perf_counter() - begin
    extrapolated = len(samples) < len(names)
    seconds = measured / len(samples) * len(names) if extrapolated else measured
    return {
        "topics": len(names),
        "measured_topics": len(samples),
        "measured_s": measured,
        "extrapolated": extrapolated,
        "seconds": seconds,
        "topics_per_s": len(names) / seconds,
        "per_topic": summarize(samples),
        "poll_interval_s": poll_s,
    }


def reenable(
    cluster: Cluster, names: Sequence[str], threads: int, processes: Processes, log: Log
) -> dict[str, Any]:
    """Turns tiering back on for every topic (DISABLED -> ENABLED, epoch unchanged) and waits
    until each broker copies every partition again and the cluster is idle."""
    begin = time.perf_counter()

    def enable(name: str) -> None:
        result = cluster.admin.incremental_alter_configs(name, TIERED)
        if result.tiered_state is not TieredState.ENABLED:
            raise RuntimeError(f"{name}: re-enable answered {result.tiered_state.value}")

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(enable, names))
    topics = cluster.admin.describe_topics(names, include_partition_state=False)
    wait_hosted(cluster, topics, timeout_s=600)
    seconds = time.perf_counter() - begin
    idle = processes.wait_idle(log)
    log(f"  re-enabled {len(names)} topics: copying again after {seconds:.1f} s")
    return {"topics": len(names), "seconds": seconds, "idle_wait_s": idle}


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


def fsync_appends(directory: Path, repeat: int) -> list[float]:
    """An fdatasync'd append of a ~200-byte record, as the metadata log appends a batch."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "floor-append.log"
    sync = getattr(os, "fdatasync", os.fsync)
    record = os.urandom(200)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    samples = []
    try:
        for i in range(repeat + 3):
            begin = time.perf_counter()
            os.write(fd, record)
            sync(fd)
            elapsed = time.perf_counter() - begin
            if i >= 3:
                samples.append(elapsed)
    finally:
        os.close(fd)
        path.unlink()
    return samples


def measure_floor(
    mode: str,
    cluster: Cluster,
    zookeeper: ZooKeeperServer | None,
    topic: TopicDescription,
    repeat: int,
) -> dict[str, Any]:
    if mode == "zookeeper":
        assert zookeeper is not None
        write = zookeeper_multis(zookeeper.connect_string, repeat)
        write_what = "ZooKeeper multi of 2 set_data (kazoo transaction)"
    else:
        write = fsync_appends(cluster.root / "floor", repeat)
        write_what = "fdatasync'd append of a 200-byte record beside the metadata log"
    rpc = grpc_round_trips(cluster, topic, repeat)
    write_s, rpc_s = statistics.median(write), statistics.median(rpc)
    return {
        "write": {**summarize(write), "what": write_what},
        "rpc": {**summarize(rpc), "what": "gRPC ListOffsets round trip to a broker"},
        "floor_s": write_s + rpc_s,
        "floor_two_writes_s": 2 * write_s + rpc_s,
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
    controller_extra = dict(CONTROLLER_DEFAULTS)
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
        processes = Processes(cluster, zookeeper)
        result["cluster_start_s"] = time.perf_counter() - begin
        log(f"[{mode}] cluster up in {result['cluster_start_s']:.1f} s ({processes.pids})")
        admin = cluster.admin
        poll_s = args.latency_poll_ms / 1000
        small = [f"single-small-{i:03d}" for i in range(args.repeat)]
        loaded = [f"single-loaded-{i:03d}" for i in range(args.repeat)]
        names = [f"topic-{i:05d}" for i in range(args.topics)]

        result["setup"] = {
            "single": make_topics(cluster, small + loaded, args.latency_partitions, processes, log)
        }
        first = admin.describe_topic(small[0], include_partition_state=False)
        result["floor"] = measure_floor(mode, cluster, zookeeper, first, args.repeat)
        log(
            f"[{mode}] floor: write {format_seconds(result['floor']['write']['median_s'])} + "
            f"round trip {format_seconds(result['floor']['rpc']['median_s'])} = "
            f"{format_seconds(result['floor']['floor_s'])}"
        )
        result["single_small"] = single_disables(admin, small, poll_s)
        log(
            f"[{mode}] single disable, {args.repeat} topics x {args.latency_partitions} "
            f"partitions alone in the cluster: median "
            f"{format_seconds(result['single_small']['median_s'])}"
        )

        result["setup"]["topics"] = make_topics(cluster, names, args.partitions, processes, log)
        result["single_loaded"] = single_disables(admin, loaded, poll_s)
        log(
            f"[{mode}] single disable with {args.topics} topics x {args.partitions} "
            f"partitions hosted: median {format_seconds(result['single_loaded']['median_s'])}"
        )
        processes.wait_idle(log)

        def profiled(phase: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
            """Runs a phase; adds the CPU each process used, the load average after it and,
            with --profile, py-spy's summary."""
            profiler = None
            if args.profile:
                profiler = Profiler(processes.python_pids(), root, phase, args.profile_rate)
            cpu_before = processes.cpu()
            figures = run()
            figures["cpu_s"] = Processes.used(cpu_before, processes.cpu())
            figures["load_average_after"] = load_average()
            if profiler is not None:
                figures["profiled"] = True
                result.setdefault("profile", {})[phase] = profiler.stop()
            return figures

        result["batched"] = profiled(
            "batched",
            lambda: batched_disable(admin, names, args.alter_threads, args.batch_poll_ms / 1000),
        )
        b = result["batched"]
        log(
            f"[{mode}] batched: {args.topics} topics DISABLED in {b['seconds']:.2f} s "
            f"({b['topics_per_s']:.1f} topics/s; alters answered after {b['alters_done_s']:.2f} "
            f"s); CPU s {b['cpu_s']}"
        )
        hosted = log_dirs(cluster)
        failures += verify(cluster, small + loaded + names, hosted, TieredState.DISABLED, 1)

        if not args.skip_baseline and not failures:
            result["reenable"] = reenable(cluster, names, args.alter_threads, processes, log)
            result["unbatched"] = profiled(
                "unbatched",
                lambda: unbatched_disable(
                    admin, names, poll_s, args.baseline_sample, args.baseline_budget_s, log
                ),
            )
            u = result["unbatched"]
            log(
                f"[{mode}] unbatched: {u['measured_topics']} topics one at a time in "
                f"{u['measured_s']:.1f} s ({u['topics_per_s']:.2f} topics/s"
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
    return result


# ----------------------------------------------------------------------------- summary


def summary_rows(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[Any]:
    rows = []
    for mode, r in results.items():
        size = f"{args.topics:,} topics x {args.partitions} partitions, {args.brokers} brokers"
        if "batched" in r and "unbatched" in r:
            u = r["unbatched"]
            baseline = "one topic at a time, each waiting for DISABLED" + (
                f" (measured on {u['measured_topics']}, extrapolated)" if u["extrapolated"] else ""
            )
            scenario = f"{mode}: disable {size}"
            rows.append(
                summary_row(
                    scenario,
                    "all at once, until every topic is DISABLED",
                    r["batched"]["seconds"],
                    "s",
                    baseline,
                    u["seconds"],
                )
            )
            rows.append(
                summary_row(
                    scenario,
                    "all at once: topics disabled per second",
                    r["batched"]["topics_per_s"],
                    "topics/s",
                    baseline,
                    u["topics_per_s"],
                )
            )
        floor = r.get("floor")
        if floor is None:
            continue
        write = "ZooKeeper multi" if mode == "zookeeper" else "fdatasync'd log append"
        for key, where in (
            ("single_small", f"{args.latency_partitions} partitions, alone in the cluster"),
            ("single_loaded", f"{args.latency_partitions} partitions, {size} hosted, idle"),
        ):
            if key in r:
                rows.append(
                    summary_row(
                        f"{mode}: one disable, {where}",
                        "alter to DISABLED seen (median)",
                        r[key]["median_s"],
                        "s",
                        f"floor: {write} + gRPC round trip (medians)",
                        floor["floor_s"],
                    )
                )
    return rows


def print_table(results: dict[str, dict[str, Any]], log: Log) -> None:
    rows: list[list[object]] = []
    for mode, r in results.items():
        if "batched" in r:
            u = r.get("unbatched")
            rows.append(
                [
                    mode,
                    f"{r['batched']['seconds']:.2f} s",
                    f"{r['batched']['topics_per_s']:.1f}",
                    f"{u['seconds']:.1f} s{'*' if u['extrapolated'] else ''}" if u else "-",
                    f"{u['topics_per_s']:.2f}" if u else "-",
                    f"{r['ratio']:.3f}" if "ratio" in r else "-",
                ]
            )
    if rows:
        log(format_table(["mode", "batched", "topics/s", "unbatched", "topics/s", "ratio"], rows))
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
                            format_seconds(r["floor"]["floor_s"]),
                            f"{r[key]['median_s'] / r['floor']['floor_s']:.1f}",
                        ]
                    )
    if rows:
        log(format_table(["single disable", "median", "floor", "ratio"], rows))


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, help="topics per set (default 1000)")
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--repeat", type=int, help="single disables and floor samples (20)")
    parser.add_argument("--latency-partitions", type=int, default=3)
    parser.add_argument("--latency-poll-ms", type=float, default=2.0)
    parser.add_argument("--batch-poll-ms", type=float, default=100.0)
    parser.add_argument("--alter-threads", type=int, default=4)
    parser.add_argument("--baseline-sample", type=int, help="topics before extrapolating (100)")
    parser.add_argument("--baseline-budget-s", type=float, default=600.0)
    parser.add_argument("--skip-baseline", action="store_true", help="no unbatched run")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the batched and unbatched phases"
    )
    parser.add_argument("--profile-rate", type=int, default=100, help="py-spy samples/s")
    parser.add_argument("--quick", action="store_true", help=f"small sizes: {QUICK}")
    parser.add_argument("--workdir", type=Path, help="where the clusters' directories go")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    args.topics = args.topics or (QUICK["topics"] if args.quick else 1000)
    args.repeat = args.repeat or (QUICK["repeat"] if args.quick else 20)
    args.baseline_sample = min(
        args.topics, args.baseline_sample or (QUICK["baseline_sample"] if args.quick else 100)
    )
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes takes a comma list of {', '.join(MODES)}")
    if min(args.topics, args.partitions, args.brokers, args.repeat, args.alter_threads) < 1:
        parser.error("--topics, --partitions, --brokers, --repeat, --alter-threads must be >= 1")

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {name: code_fingerprint(name) for name in ("tiered", "controller", "broker")}
    results: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    partitions_per_broker = math.ceil(
        (args.topics * args.partitions + 2 * args.repeat * args.latency_partitions) / args.brokers
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
            "Disabling tiered storage on --topics topics at once (alters from a few threads, "
            "until every topic is DISABLED) against one topic at a time waiting for DISABLED "
            "(the baseline; extrapolated from a sample when it would be too long), on a real "
            "multi-process cluster per metadata mode; and one disable's latency (alter to "
            "DISABLED seen) against a floor of one metadata write (ZooKeeper multi or "
            "fdatasync'd append) plus one gRPC round trip. ratio = batched s / unbatched s; "
            "single ratio = median latency / floor."
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
            "modes": modes,
            "repeat": args.repeat,
            "latency_partitions": args.latency_partitions,
            "latency_poll_ms": args.latency_poll_ms,
            "batch_poll_ms": args.batch_poll_ms,
            "alter_threads": args.alter_threads,
            "baseline_sample": args.baseline_sample,
            "baseline_budget_s": args.baseline_budget_s,
            "skip_baseline": args.skip_baseline,
            "profile": args.profile,
            "quick": args.quick,
            "controller": CONTROLLER_DEFAULTS,
            "broker": BROKER_EXTRA,
            "zookeeper": "forceSync=yes",
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
