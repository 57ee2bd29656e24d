"""The controller at scale: start-up time, a single disable's latency and memory with N topics in
its metadata store, in KRaft and ZooKeeper mode, against baselines measured in the same run.

Per mode and size N (``--topics``, default 10,000 and 100,000; ``--quick``: 1,000 and 5,000):

- **Seeding** (``bench/seed_metadata.py``, not timed as part of anything): N topics of one
  partition each on brokers 1..3, ENABLED (``remote.storage.enable=true``), plus one *probe*
  topic of one partition on broker 4. KRaft: a fresh metadata log (one batch per topic, as the
  controller writes them, and a snapshot at the end, as a controller that created them would have
  within 20,000 records). ZooKeeper: the five znodes a topic, in a fresh ZooKeeper server (1 GiB
  heap; ``forceSync=no`` as in the tests) per size.
- **Start-up**: the real controller process, ``python -m controller.main --config FILE`` on that
  store, from spawn until it logged "Active as controller" *and* answered a DescribeCluster and a
  DescribeTopics of the probe topic (``startup_s``); also spawn until "serving on" (the gRPC
  server listens: interpreter start and imports) and from there to active (``load_s``: election,
  store load, activation). Repeated ``--repeat`` times (median).
- **CPU**: the controller's CPU seconds (user + system, ``/proc/PID/stat``) from spawn until
  it is active and idle, against the baseline process's own: steadier than wall-clock times
  when other jobs share the machine.
- **Memory**: the controller's VmRSS (``/proc/PID/status``) once it is active and idle (no CPU
  used for half a second), and its peak (VmHWM). Also per topic: (RSS at N - RSS with the probe
  topic only) / N.
- **A single disable**: a real broker process (id 4) hosting only the probe topic is started and
  the probe topic is disabled (``remote.storage.enable=false``, policy retain) and re-enabled
  ``--disables`` times, after two that are not counted, once broker and controller are idle
  (a KRaft broker first catches up with the metadata log: the image of N topics); latency =
  from the AlterConfigs call until a DescribeTopics polled every 2 ms shows DISABLED
  (DISABLING persisted, DisableRemoteTopic sent to broker 4, acked, DISABLED persisted).
  The N seeded topics' brokers 1..3 are not running: they are not
  registered, so the controller sends them nothing, and a disablement only waits for the
  brokers hosting *its* partitions (``Disablements`` owes per topic), so they do not block
  the probe. What is measured is the controller's path at N topics (validation, persisting in a
  store of N topics, queue, state machine). A real cluster whose brokers host all N partitions
  was not run: each broker would host N/3 local logs (100k partitions: 33k log directories a
  broker, its own start-up dominating the run) and that is broker scale, not controller scale.

Baselines, each in the same run:

- start-up: a fresh Python process that reads the same data raw, without processing it, timed
  the same way from spawn (``baseline_read``): KRaft: reads the files a controller's recovery
  reads (every segment and the newest snapshot) and splits them into CRC-checked frames (the
  protobuf parse of every frame is measured separately, as information); ZooKeeper: one kazoo
  session, ``get_children(/brokers/topics)`` and the same four znodes per topic the controller's
  load reads, fetched with the same multiRead requests (1,000 reads a request, 8 in flight),
  data kept as bytes. ``load_s`` is compared with that process's own read time.
  With ``--zk-async-baseline`` the same reads as one async ``get`` per znode (2,000 in flight)
  are timed too (information: much slower than multiRead).
- memory: that baseline process's VmRSS holding the raw bytes (also reported: the raw data size).
- a disable: the same disable with only the probe topic in the store (size 0), same run.

ratio = controller figure / baseline figure (above 1: the controller takes longer or more).
Timings are never asserted; a failure (a controller that does not come up, a disable that never
completes) exits 1.

Usage: ``python bench/controller_scale.py [--quick] [--topics 10000,100000] [--modes
kraft,zookeeper] [--repeat 2] [--disables 5] [--code-root DIR] [--out PATH]`` (results default
to ``bench/results/controller_scale.json``). ``--code-root`` runs the controller and broker
processes from another checkout (e.g. ``git archive`` of an older commit) for a before/after
comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    REPO_ROOT,
    RESULTS_DIR,
    code_fingerprint,
    format_bytes,
    format_seconds,
    format_table,
    machine_info,
    process_cpu_seconds,
    summary_row,
    utc_now,
    write_json,
)
from bench.seed_metadata import make_topic, make_topics, seed_kraft, seed_zookeeper
from cli.launch.ports import free_port
from cli.launch.zookeeper import ZooKeeperServer

DEFAULT_OUT = RESULTS_DIR / "controller_scale.json"
DEFAULT_SIZES = (10_000, 100_000)
QUICK_SIZES = (1_000, 5_000)
DEFAULT_MODES = ("kraft", "zookeeper")
PROBE_BROKER = 4
ZK_CHROOT = "/tiered"
ZK_HEAP = "-Xmx1g"
POLL_S = 0.002
WARMUP_DISABLES = 2  # disables (and re-enables) before the measured ones
# Which checkout the controller and broker processes run from (``--code-root``): this one, or
# another (e.g. ``git archive`` of an older commit) for a before/after comparison.
DAEMON_ROOT = REPO_ROOT


# --------------------------------------------------------------------------------- processes


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes ({} once it is gone)."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(line.split()[1]) * 1024
    except OSError:
        return {}
    return found


def wait_idle(
    pid: int, *, window_s: float = 0.5, max_cpu: float = 0.05, timeout_s: float = 60
) -> float:
    """Waits until ``pid`` used less than ``max_cpu`` CPU seconds in ``window_s``; returns the
    seconds waited."""
    started = time.monotonic()
    last = process_cpu_seconds(pid)
    while time.monotonic() - started < timeout_s:
        time.sleep(window_s)
        now = process_cpu_seconds(pid)
        if now - last < max_cpu:
            break
        last = now
    return time.monotonic() - started


class Daemon:
    """A daemon process (``python -m MODULE --config FILE``) whose output lines are kept with the
    wall-clock time (``time.time()``) at which each arrived; the output also goes to ``log_path``."""

    def __init__(
        self,
        name: str,
        module: str,
        config: Path,
        properties: dict[str, str],
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.module = module
        self.config = config
        self.properties = properties
        self.env = env or {}
        self.log_path = config.with_suffix(".log")
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[tuple[float, str]] = []
        self.spawned_at = 0.0
        self._cond = threading.Condition()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        env = {**os.environ, **self.env}
        with self._cond:
            self.lines = []
        self.spawned_at = time.time()
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, "--config", str(self.config)],
            cwd=DAEMON_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._pump, args=(self.process,), daemon=True).start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"---- start {self.name}\n")
            for line in process.stdout:
                now = time.time()
                log.write(line)
                log.flush()
                with self._cond:
                    self.lines.append((now, line))
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, text: str, timeout_s: float, start: int = 0) -> tuple[int, float, str]:
        """The first line from index ``start`` on containing ``text``: (index, arrival time,
        line). Raises if the process exits or ``timeout_s`` passes first."""
        deadline = time.monotonic() + timeout_s
        index = start
        with self._cond:
            while True:
                while index < len(self.lines):
                    at, line = self.lines[index]
                    if text in line:
                        return index, at, line
                    index += 1
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited ({self.process.returncode}) before printing "
                        f"{text!r}:\n{self.tail()}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError(
                        f"{self.name} printed no {text!r} in {timeout_s}s:\n{self.tail()}"
                    )
                self._cond.wait(min(remaining, 0.5))

    def matching(self, text: str) -> list[tuple[float, str]]:
        with self._cond:
            return [(at, line) for at, line in self.lines if text in line]

    def tail(self, count: int = 40) -> str:
        with self._cond:
            return "".join(line for _, line in self.lines[-count:])

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> float:
        """kill -9; returns the wall-clock time it was sent."""
        assert self.process is not None
        at = time.time()
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        return at

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM, SIGKILL after ``timeout_s``."""
        if not self.alive:
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)


class BenchZooKeeper(ZooKeeperServer):
    """The tests' ZooKeeper server with a heap for 500k znodes (``-Xmx256m`` is too small)."""

    def _command(self) -> list[str]:
        return [ZK_HEAP if arg.startswith("-Xmx") else arg for arg in super()._command()]

    @classmethod
    def started(cls, root: Path) -> tuple[BenchZooKeeper, str]:
        """A server with its data under ``root / "zookeeper"``, serving, and the connect string
        of the benchmarks' chroot on it."""
        zookeeper = cls(root / "zookeeper")
        zookeeper.start()
        return zookeeper, zookeeper.connect_string + ZK_CHROOT


def controller_properties(
    root: Path, mode: str, node_id: int, port: int, zk_connect: str | None
) -> dict[str, str]:
    props = {
        "node.id": str(node_id),
        "listeners": f"127.0.0.1:{port}",
        "metadata.store": mode,
        "broker.session.timeout.ms": "3000",
        "controller.retry.backoff.ms": "50",
        "controller.retry.backoff.max.ms": "500",
        "controller.request.timeout.ms": "10000",
    }
    if mode == "kraft":
        props["metadata.log.dir"] = str(root / "metadata")
    else:
        assert zk_connect is not None
        props["zookeeper.connect"] = zk_connect
    return props


def broker_properties(
    root: Path, mode: str, broker_id: int, port: int, bootstrap: str, zk_connect: str | None
) -> dict[str, str]:
    """As the tests' clusters configure brokers, with tiering tasks every second (idle brokers
    hosting thousands of partitions would otherwise spend the CPU being measured)."""
    # Imported here: the baseline's fresh process imports this module, and must not pay for
    # the test harness (half a second of imports) that the controller does not load.
    from tests.support.cluster import broker_properties as cluster_broker_properties

    return cluster_broker_properties(
        root, mode, broker_id, port, bootstrap, zk_connect, task_interval_ms=1000
    )


# --------------------------------------------------------------------------------- baseline


def _baseline_read_kraft(directory: Path, parse: bool) -> dict[str, Any]:
    """Reads what recovery reads (the newest snapshot, every segment) and splits CRC-checked
    frames; with ``parse`` also parses every frame's payload (timed apart)."""
    import struct

    header = struct.Struct(">II")
    started = time.perf_counter()
    snapshots = sorted(directory.glob("*.snapshot"))
    paths = [*snapshots[-1:], *sorted(directory.glob("*.log"))]
    blobs = [p.read_bytes() for p in paths]
    read_s = time.perf_counter() - started
    payloads: list[memoryview] = []
    for data in blobs:
        view = memoryview(data)
        pos = 0
        while pos + header.size <= len(data):
            length, crc = header.unpack_from(data, pos)
            payload = view[pos + header.size : pos + header.size + length]
            if zlib.crc32(payload) != crc:
                raise RuntimeError(f"bad frame at {pos}")
            payloads.append(payload)
            pos += header.size + length
    framed_s = time.perf_counter() - started
    result: dict[str, Any] = {
        "files": len(paths),
        "bytes": sum(len(b) for b in blobs),
        "frames": len(payloads),
        "file_read_s": read_s,
        "read_s": framed_s,
    }
    rss = proc_status(os.getpid())
    result["rss_bytes"], result["peak_rss_bytes"] = rss.get("VmRSS"), rss.get("VmHWM")
    result["cpu_s"] = time.process_time()  # since the process started: interpreter, imports
    if parse:
        from tiered.rpc.v1 import metadata_pb2

        started = time.perf_counter()
        records = 0
        for payload in payloads:
            batch = metadata_pb2.MetadataRecordBatch()
            batch.ParseFromString(payload)
            records += len(batch.records)
        result["protobuf_parse_s"] = time.perf_counter() - started
        result["records"] = records
    return result


def _baseline_read_zookeeper(connect: str, use_async: bool) -> dict[str, Any]:
    """get_children of /brokers/topics, then the four znodes of every topic that the controller's
    load reads: by multiRead (as the controller) or one async get per znode."""
    from tiered.cluster import zk_paths
    from tiered.zk_client import ZkClient
    from tiered.zk_multi_read import BulkReader

    zk = ZkClient(connect, session_timeout_s=30)
    zk.start(30)
    chroot = zk.chroot
    try:
        started = time.perf_counter()
        names = zk.children(chroot + zk_paths.BROKER_TOPICS)
        paths: list[str] = []
        for name in names:
            paths += [
                chroot + zk_paths.topic(name),
                chroot + zk_paths.tiered_epoch(name),
                chroot + zk_paths.tiered_state(name),
                chroot + zk_paths.topic_config(name),
            ]
        values = [
            None if found is None else found[0]
            for found in BulkReader(zk, multi_read=not use_async).iter(paths)
        ]
        read_s = time.perf_counter() - started
    finally:
        zk.close()
    rss = proc_status(os.getpid())
    return {
        "cpu_s": time.process_time(),  # since the process started: interpreter, imports
        "znodes": len(values),
        "topics": len(names),
        "bytes": sum(len(v) for v in values if v is not None),
        "read_s": read_s,
        "method": "async get" if use_async else "multiRead",
        "rss_bytes": rss.get("VmRSS"),
        "peak_rss_bytes": rss.get("VmHWM"),
    }


def run_baseline_read(mode: str, target: str, variant: str) -> dict[str, Any]:
    """Runs the raw read in a fresh process; returns its figures plus ``process_s`` (spawn until
    it printed its result)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--baseline-read", mode, target, variant],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"baseline read failed: {done.stdout}{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = elapsed
    return result


# --------------------------------------------------------------------------------- measuring


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def start_controller(
    root: Path, mode: str, zk_connect: str | None, label: str
) -> tuple[Daemon, dict[str, Any]]:
    """Starts a controller on the seeded store and waits until it is active and answers;
    returns it and its start-up figures."""
    from tiered.admin import AdminClient

    port = free_port()
    daemon = Daemon(
        f"controller-{label}",
        "controller.main",
        root / "config" / f"controller-{label}.properties",
        controller_properties(root, mode, 100, port, zk_connect),
    )
    daemon.start()
    spawned = daemon.spawned_at
    _, serving_at, _ = daemon.wait_for("serving on", 120)
    _, active_at, active_line = daemon.wait_for("Active as controller", 900)
    admin = AdminClient(f"127.0.0.1:{port}", timeout_s=60)
    try:
        admin.describe_cluster()
        probe = admin.describe_topic(make_topic(0, prefix="probe").name, False)
        answered_at = time.time()
    finally:
        admin.close()
    figures: dict[str, Any] = {
        "startup_s": answered_at - spawned,
        "serving_s": serving_at - spawned,
        "load_s": active_at - serving_at,
        "active_s": active_at - spawned,
        "active_line": active_line.strip(),
        "probe_state": probe.tiered_state.value,
    }
    recovered = daemon.matching("recovered in")
    if recovered:
        text = recovered[-1][1]
        figures["log_recovery_s"] = float(text.split("recovered in ")[1].split("s:")[0])
    figures["idle_wait_s"] = wait_idle(daemon.pid)
    rss = proc_status(daemon.pid)
    figures["rss_bytes"], figures["peak_rss_bytes"] = rss.get("VmRSS"), rss.get("VmHWM")
    figures["cpu_s"] = process_cpu_seconds(daemon.pid)
    return daemon, figures


def measure_disables(
    root: Path, mode: str, zk_connect: str | None, controller: Daemon, count: int
) -> dict[str, Any]:
    """Starts broker 4 (hosting the probe topic), then disables and re-enables the probe topic
    ``count`` times; latency from the AlterConfigs call until DescribeTopics shows DISABLED."""
    from tiered.admin import AdminClient
    from tiered.cluster.model import TieredState

    bootstrap = controller.properties["listeners"]
    broker = Daemon(
        "broker-4",
        "broker.main",
        root / "config" / "broker-4.properties",
        broker_properties(root, mode, PROBE_BROKER, free_port(), bootstrap, zk_connect),
    )
    admin = AdminClient(bootstrap, timeout_s=60)
    name = make_topic(0, prefix="probe").name
    try:
        started = time.time()
        broker.start()
        broker.wait_for("serving on", 120)
        deadline = time.monotonic() + 300
        while True:
            topic = admin.describe_topic(name, include_partition_state=True)
            if topic.partitions[0].log_end_offset is not None:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker 4 never hosted {name}:\n{broker.tail()}")
            time.sleep(0.05)
        hosted_s = time.time() - started
        # The broker catches up with the metadata log (KRaft: the image of N topics) meanwhile.
        wait_idle(broker.pid, window_s=1.0)
        wait_idle(controller.pid, window_s=1.0)
        latencies: list[float] = []
        alter_latencies: list[float] = []
        for attempt in range(WARMUP_DISABLES + count):
            started_at = time.perf_counter()
            result = admin.incremental_alter_configs(name, {"remote.storage.enable": "false"})
            alter_latencies.append(time.perf_counter() - started_at)
            if result.tiered_state is not TieredState.DISABLING:
                raise RuntimeError(f"disable of {name} answered {result}")
            deadline = time.monotonic() + 120
            while admin.describe_topic(name, False).tiered_state is not TieredState.DISABLED:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} never reached DISABLED:\n{controller.tail()}")
                time.sleep(POLL_S)
            if attempt >= WARMUP_DISABLES:
                latencies.append(time.perf_counter() - started_at)
            else:
                del alter_latencies[-1]
            admin.incremental_alter_configs(name, {"remote.storage.enable": "true"})
            time.sleep(0.2)  # the broker resumes tiering
        return {
            "broker_hosted_probe_s": hosted_s,
            "disables": count,
            "latency_s": latencies,
            "median_latency_s": median(latencies),
            "alter_call_s": alter_latencies,
            "median_alter_call_s": median(alter_latencies),
        }
    finally:
        admin.close()
        broker.stop()


def seed(root: Path, mode: str, size: int, zk_connect: str | None) -> dict[str, Any]:
    topics = [*make_topics(size), make_topic(0, prefix="probe", brokers=(PROBE_BROKER,))]
    if mode == "kraft":
        return seed_kraft(root / "metadata", topics).as_dict()
    assert zk_connect is not None
    return seed_zookeeper(zk_connect, topics).as_dict()


def measure_size(
    work: Path, mode: str, size: int, repeat: int, disables: int, zk_async: bool
) -> dict[str, Any]:
    root = work / f"{mode}-{size}"
    root.mkdir(parents=True)
    zookeeper: BenchZooKeeper | None = None
    zk_connect: str | None = None
    try:
        if mode == "zookeeper":
            zookeeper, zk_connect = BenchZooKeeper.started(root)
        print(f"  {mode} {size}: seeding", flush=True)
        seeded = seed(root, mode, size, zk_connect)
        target = str(root / "metadata") if mode == "kraft" else str(zk_connect)
        baselines = [run_baseline_read(mode, target, "parse") for _ in range(3)]
        baseline_async = (
            run_baseline_read(mode, target, "async") if mode == "zookeeper" and zk_async else None
        )
        startups: list[dict[str, Any]] = []
        disable: dict[str, Any] = {}
        for attempt in range(repeat):
            print(f"  {mode} {size}: controller start-up {attempt + 1}/{repeat}", flush=True)
            controller, figures = start_controller(root, mode, zk_connect, f"{attempt}")
            try:
                startups.append(figures)
                if attempt == repeat - 1 and disables > 0:
                    print(f"  {mode} {size}: {disables} disables", flush=True)
                    disable = measure_disables(root, mode, zk_connect, controller, disables)
            finally:
                controller.stop()
                controller.close()
        return {
            "mode": mode,
            "topics": size,
            "seed": seeded,
            "baseline_read": baselines,
            "baseline_read_async": baseline_async,
            "startups": startups,
            "startup_s": median([s["startup_s"] for s in startups]),
            "load_s": median([s["load_s"] for s in startups]),
            "serving_s": median([s["serving_s"] for s in startups]),
            "rss_bytes": median([s["rss_bytes"] for s in startups]),
            "peak_rss_bytes": median([s["peak_rss_bytes"] for s in startups]),
            "cpu_s": median([s["cpu_s"] for s in startups]),
            "baseline_cpu_s": median([b["cpu_s"] for b in baselines]),
            "baseline_process_s": median([b["process_s"] for b in baselines]),
            "baseline_read_s": median([b["read_s"] for b in baselines]),
            "baseline_rss_bytes": median([b["rss_bytes"] for b in baselines]),
            "raw_bytes": baselines[0]["bytes"],
            "disable": disable,
        }
    finally:
        if zookeeper is not None:
            zookeeper.close()
        shutil.rmtree(root, ignore_errors=True)


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    by_mode: dict[str, dict[int, dict[str, Any]]] = {}
    for r in results:
        by_mode.setdefault(r["mode"], {})[r["topics"]] = r
    for mode, sizes in by_mode.items():
        zero = sizes.get(0)
        for size, r in sorted(sizes.items()):
            if size == 0:
                continue
            scenario = f"controller {mode}, {size:,} topics"
            rows.append(
                summary_row(
                    scenario,
                    "start-up: spawn to active and answering",
                    r["startup_s"],
                    "s",
                    "fresh process reading the same data raw (spawn to done)",
                    r["baseline_process_s"],
                )
            )
            rows.append(
                summary_row(
                    scenario,
                    "load: serving to active (election, load, activation)",
                    r["load_s"],
                    "s",
                    "raw read of the same data inside that process",
                    r["baseline_read_s"],
                )
            )
            rows.append(
                summary_row(
                    scenario,
                    "start-up CPU seconds (spawn to active and idle)",
                    r["cpu_s"],
                    "s",
                    "CPU seconds of the raw-read process",
                    r["baseline_cpu_s"],
                )
            )
            rows.append(
                summary_row(
                    scenario,
                    "RSS after start-up",
                    r["rss_bytes"],
                    "B",
                    "RSS of the process holding the raw data",
                    r["baseline_rss_bytes"],
                )
            )
            if zero is not None and r["disable"] and zero["disable"]:
                rows.append(
                    summary_row(
                        scenario,
                        "one disable: AlterConfigs to DISABLED",
                        r["disable"]["median_latency_s"],
                        "s",
                        "the same disable with only the probe topic",
                        zero["disable"]["median_latency_s"],
                    )
                )
    return rows


def print_results(results: list[dict[str, Any]]) -> None:
    rows = []
    for r in results:
        rows.append(
            [
                f"{r['mode']} {r['topics']:,}",
                format_seconds(r["startup_s"]),
                format_seconds(r["baseline_process_s"]),
                format_seconds(r["load_s"]),
                format_seconds(r["baseline_read_s"]),
                format_bytes(r["rss_bytes"]),
                format_bytes(r["baseline_rss_bytes"]),
                format_bytes(r["raw_bytes"]),
                format_seconds(r["disable"]["median_latency_s"]) if r["disable"] else "-",
            ]
        )
    print(
        format_table(
            [
                "store",
                "start-up",
                "baseline",
                "load",
                "raw read",
                "RSS",
                "baseline RSS",
                "raw data",
                "disable",
            ],
            rows,
        )
    )


def add_code_root_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--code-root",
        type=Path,
        default=None,
        help="run the controller and broker processes from this checkout of the project instead "
        "(e.g. `git archive` of an older commit, for a before/after comparison); seeding and "
        "baselines use this one",
    )


def use_code_root(root: Path | None) -> None:
    global DAEMON_ROOT  # noqa: PLW0603 - one setting for the whole run
    if root is not None:
        if not (root / "controller" / "main.py").is_file():
            raise SystemExit(f"--code-root {root}: no controller/main.py there")
        DAEMON_ROOT = root.resolve()


def exit_on_sigterm() -> None:
    """SIGTERM (``timeout``, an impatient caller) unwinds like Ctrl-C, so that the processes a
    benchmark started are stopped by its ``finally`` blocks instead of being left running."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def main(argv: list[str] | None = None) -> int:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000 and 5,000 topics")
    parser.add_argument("--topics", help="comma-separated sizes (default 10000,100000)")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--repeat", type=int, default=None, help="start-ups per size (2; quick 1)")
    parser.add_argument("--disables", type=int, default=5, help="disables per size")
    parser.add_argument(
        "--zk-async-baseline",
        action="store_true",
        help="also time the ZooKeeper reads as one async get per znode (slow at 100k)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    add_code_root_argument(parser)
    parser.add_argument("--baseline-read", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    use_code_root(args.code_root)

    if args.baseline_read:
        mode, target, variant = args.baseline_read
        if mode == "kraft":
            result = _baseline_read_kraft(Path(target), parse=variant == "parse")
        else:
            result = _baseline_read_zookeeper(target, use_async=variant == "async")
        print(json.dumps(result))
        return 0

    sizes = (
        [int(s) for s in args.topics.split(",") if s.strip()]
        if args.topics
        else list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    )
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    repeat = args.repeat or (1 if args.quick else 2)
    document: dict[str, Any] = {
        "benchmark": "controller_scale",
        "started": utc_now(),
        "machine": machine_info(),
        "code": code_fingerprint(),
        "parameters": {
            "sizes": sizes,
            "modes": modes,
            "repeat": repeat,
            "disables": args.disables,
            "quick": args.quick,
            "partitions_per_topic": 1,
            "brokers": [1, 2, 3],
            "probe_broker": PROBE_BROKER,
            "daemon_code_root": str(DAEMON_ROOT),
        },
        "results": [],
        "failures": [],
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tiered-controller-scale-") as tmp:
        for mode in modes:
            for size in [0, *sizes]:
                try:
                    result = measure_size(
                        Path(tmp), mode, size, repeat, args.disables, args.zk_async_baseline
                    )
                except Exception as e:
                    traceback.print_exc()
                    document["failures"].append(f"{mode} {size}: {e}")
                    continue
                document["results"].append(result)
                print_results([result])
    document["finished"] = utc_now()
    document["elapsed_s"] = time.perf_counter() - started
    document["summary"] = summarize(document["results"])
    document["ok"] = not document["failures"]
    print()
    print_results(document["results"])
    for row in document["summary"]:
        ratio = row["ratio"]
        print(f"{row['scenario']}: {row['figure']}: ratio {ratio:.2f}" if ratio else str(row))
    write_json(args.out, document)
    print(f"results: {args.out} ({document['elapsed_s']:.0f}s)")
    return 0 if document["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
