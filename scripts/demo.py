"""The quickstart demo (``make demo``): a real local cluster, a real KIP-950 disable.

Runs the commands an operator would type, printing each one (``$ ...``) before running it:
``tiered-cluster up`` (KRaft mode, 3 brokers), ``tiered-topics --create`` of a tiered topic with
small segments, ``tiered-console-producer`` fed with generated lines while ``tiered-topics
--describe`` shows the segments tiering, reads from both tiers with ``tiered-console-consumer``,
``tiered-configs --alter ... remote.storage.enable=false --dry-run`` (what it would delete,
nothing changed), then ``--wait`` with the delete policy (DISABLING, the bulk delete, checked to
run where the narration says, DISABLED), a re-enable that tiers
new data under the new tiered epoch, a confluent-kafka AdminClient (a ``python -`` snippet on
the brokers' Kafka listeners) that turns tiered storage off again with IncrementalAlterConfigs
(retain policy), and ``tiered-cluster down``; then a secure cluster (``up --secure``) where a
principal without Delete on a topic is refused a delete-policy disable and, granted Delete,
disables it (``scripts/demo_secure.py``). It checks each outcome and exits non-zero if one is
wrong; on a failure or Ctrl-C it still stops the clusters and says where the logs are.

Run by ``scripts/demo.sh`` (after ``scripts/ensure_env.sh``) with ``.venv/bin/python``:

    TIERED_DEMO_DIR     the cluster's data directory (default: a new temporary directory)
    TIERED_DEMO_RECORDS records to produce before the disable (default 24000)
    TIERED_DEMO_PROFILE local (default) or distributed: ``tiered-cluster up --profile``; the
                        distributed story is the same on a ZooKeeper ensemble, an S3 endpoint
                        and a Spark standalone cluster
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from demo_cluster import SPARK_APP_NAME, ClusterView
from demo_output import (
    RECORD_BYTES,
    elapsed_text,
    explain,
    say,
    show_command,
    write_records,
)
from demo_secure import SecureStep
from demo_topics import Topic

from tiered.rsm.layout import WRITTEN_BY_EVERY_COPY

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"

TOPIC = "orders"
PARTITIONS = 3
BROKERS = 3
# ~33 records of ~100 bytes a segment: 24000 records make ~240 segments a partition, 4 objects
# each in remote storage (log, offset index, time index, leader epochs): the job's objects in
# all are more than the controller's bulk.delete.fast.path.max.objects (2000), so the bulk
# delete runs on Spark.
SEGMENT_BYTES = 4096
LOCAL_RETENTION_BYTES = 16384  # ~4 segments stay local; older ones are read from remote storage
DEFAULT_RECORDS = 24_000
MIN_RECORDS = 1_500  # each partition tiers >= MIN_SEGMENTS and expires some local segments
MORE_RECORDS = 1_500  # after the re-enable: enough to push the local log start past them
MIN_SEGMENTS = 10
# The console producer sends each request as one Kafka record batch, and a batch never spans
# segments: batches of ~33 records fill a 4 KiB segment each.
RECORDS_PER_BATCH = 33
PROFILES = ("local", "distributed")
POLL_INTERVAL_S = 1.0
TIERING_TIMEOUT_S = 120.0
COMMAND_TIMEOUT_S = 300.0


# The Kafka client step: a script the demo shows as typed into ``python -`` (argv[1]: the
# brokers' Kafka listeners). It turns tiered storage off with IncrementalAlterConfigs, which
# returns once DISABLING is persisted, then follows DescribeConfigs until DISABLED.
KAFKA_ADMIN_SCRIPT = Path(__file__).resolve().parent / "demo_kafka_admin.py"


class DemoError(Exception):
    pass


class SignalledError(Exception):
    """Ctrl-C, SIGTERM or SIGHUP."""


def _interrupt(signum: int, _frame: FrameType | None) -> NoReturn:
    raise SignalledError(signal.Signals(signum).name)


# --------------------------------------------------------------------------------- the demo


def check(condition: bool, message: str) -> None:
    if not condition:
        raise DemoError(message)


class Demo:
    def __init__(self, data_dir: Path, records: int, started: float, profile: str) -> None:
        self.dir = data_dir
        self.records = records
        self.profile = profile
        self.started = started
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.bootstrap = ""
        self.kafka_bootstrap = ""  # the brokers' Kafka listeners
        self.view: ClusterView | None = None  # once the cluster is up
        self.cluster_touched = False
        self.cluster_down = False
        self.secure = SecureStep(data_dir / "secure", self.run, check)

    # -- running commands ----------------------------------------------------------------

    def run(
        self,
        args: Sequence[str],
        *,
        stdin: Path | None = None,
        heredoc: str | None = None,
        expect: int = 0,
        capture: bool = False,
        quiet: bool = False,
    ) -> str:
        """Runs a command as an operator would, after printing it. Its output goes to the
        terminal as is, or with ``capture`` through this process (stderr merged into stdout, so
        the order holds) and is returned; ``quiet`` runs it unseen, returning its stdout. An exit
        code other than ``expect`` fails the demo. ``heredoc`` is typed on stdin (shown as a
        ``<<'EOF'`` document)."""
        if heredoc is not None:
            stdin = self.dir / "heredoc.txt"
            stdin.write_text(heredoc)
            show_command(args, " <<'EOF'")
            say(heredoc + "EOF")
            quiet_command = True
        else:
            quiet_command = quiet
        if not quiet_command:
            show_command(args, f" < {stdin}" if stdin else "")
        piped = capture or quiet
        with (
            stdin.open("rb") if stdin else open(os.devnull, "rb") as source,
            subprocess.Popen(
                list(args),
                stdin=source,
                stdout=subprocess.PIPE if piped else None,
                stderr=subprocess.STDOUT if capture and not quiet else None,
                text=True,
                env=self.env,
                cwd=REPO,
            ) as process,
        ):
            lines = []
            if process.stdout is not None:
                for line in process.stdout:
                    lines.append(line)
                    if not quiet:
                        sys.stdout.write(line)
                        sys.stdout.flush()
            try:
                code = process.wait(timeout=COMMAND_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                raise DemoError(f"{args[0]} did not finish in {COMMAND_TIMEOUT_S:.0f}s") from None
        if code != expect:
            raise DemoError(f"{args[0]} exited with {code} (expected {expect})")
        return "".join(lines)

    def admin(self, command: str, *args: str) -> list[str]:
        return [command, "--bootstrap-server", self.bootstrap, *args]

    def alter_topic(self, add_config: str, *more: str) -> list[str]:
        """``tiered-configs --alter`` of the demo's topic."""
        return self.admin(
            "tiered-configs",
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            TOPIC,
            "--add-config",
            add_config,
            *more,
        )

    def describe(self) -> Topic:
        out = self.run(
            self.admin("tiered-topics", "--describe", "--topic", TOPIC, "--format", "json"),
            quiet=True,
        )
        topics = json.loads(out)
        check(len(topics) == 1, f"describe returned {len(topics)} topics")
        return Topic.from_json(topics[0])

    def watch(
        self, until: Callable[[Topic], bool], producer: subprocess.Popen[bytes] | None
    ) -> Topic:
        """Polls the topic every POLL_INTERVAL_S, printing a progress line when it changes,
        until the producer (if any) has exited, ``until`` holds and tiering has settled (nothing
        changed since the previous poll)."""
        show_command(
            self.admin("tiered-topics", "--describe", "--topic", TOPIC, "--format", "json"),
            "   # every second",
        )
        say("  per partition: remote segments/remote bytes, local log start offset")
        start = time.monotonic()
        last = ""
        while True:
            topic = self.describe()
            line = topic.progress()
            settled = line == last
            if not settled:
                say(f"  {time.monotonic() - start:5.1f}s  {line}")
                last = line
            producing = producer is not None and producer.poll() is None
            if producer is not None and not producing and producer.returncode != 0:
                raise DemoError(f"tiered-console-producer exited with {producer.returncode}")
            if not producing and settled and until(topic):
                return topic
            if time.monotonic() - start > TIERING_TIMEOUT_S:
                raise DemoError(f"tiering did not get there within {TIERING_TIMEOUT_S:.0f}s")
            time.sleep(POLL_INTERVAL_S)

    def produce_and_watch(self, path: Path, until: Callable[[Topic], bool]) -> Topic:
        args = self.admin(
            "tiered-console-producer", "--topic", TOPIC, "--batch-size", str(RECORDS_PER_BATCH)
        )
        show_command(args, f" < {path}")
        with (
            path.open("rb") as source,
            subprocess.Popen(args, stdin=source, env=self.env, cwd=REPO) as producer,
        ):
            try:
                return self.watch(until, producer)
            finally:
                if producer.poll() is None:  # the demo failed or was interrupted
                    producer.send_signal(signal.SIGINT)  # it prints what was acknowledged
                    try:
                        producer.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        producer.kill()

    @property
    def cluster(self) -> ClusterView:
        assert self.view is not None, "the cluster is not up yet"
        return self.view

    # -- the story -----------------------------------------------------------------------

    def main(self) -> None:
        say(f"tiered demo: a {self.profile} cluster in {self.dir} (commands are in {BIN})")
        check(
            not (self.dir / "cluster.json").exists(),
            f"{self.dir} already holds a cluster: set TIERED_DEMO_DIR to a new directory",
        )

        up = ["tiered-cluster", "up", "--data-dir", str(self.dir), "--brokers", str(BROKERS)]
        if self.profile == "distributed":
            explain(
                f"Start the distributed profile: a controller, a standby and {BROKERS} brokers on a "
                "three-server ZooKeeper",
                "ensemble (metadata and RLMM), an S3 endpoint for remote storage and a Spark master "
                "with two workers",
                "for the bulk delete; one process each, no file shared between them.",
            )
            up += ["--profile", "distributed"]
        else:
            explain(
                f"Start a local cluster in KRaft mode: a controller, a standby and {BROKERS} "
                "brokers, one process each."
            )
        self.cluster_touched = True
        out = self.run(up, capture=True)
        self.bootstrap = out.strip().splitlines()[-1]  # printed last
        self.view = ClusterView(self.dir)
        self.kafka_bootstrap = self.cluster.layout["kafka_bootstrap_servers"]
        say(f"  {self.dir / 'cluster.json'}: kafka_bootstrap_servers={self.kafka_bootstrap}")
        for key in ("zookeeper", "s3_endpoint", "spark_master"):
            if key in self.cluster.layout and self.profile == "distributed":
                say(f"  {key}={self.cluster.layout[key]}")

        explain(
            f"Create a tiered topic: {SEGMENT_BYTES // 1024} KiB segments, and once tiered only "
            f"{LOCAL_RETENTION_BYTES // 1024} KiB a partition kept in the local log."
        )
        self.run(
            self.admin(
                "tiered-topics",
                "--create",
                "--topic",
                TOPIC,
                "--partitions",
                str(PARTITIONS),
                "--config",
                "remote.storage.enable=true",
                "--config",
                f"segment.bytes={SEGMENT_BYTES}",
                "--config",
                f"local.retention.bytes={LOCAL_RETENTION_BYTES}",
            )
        )

        orders = self.dir / "orders.txt"
        write_records(orders, 0, self.records, seed=1)
        explain(
            f"Produce {self.records} records of ~{RECORD_BYTES} bytes, round-robin over the "
            "partitions, and watch",
            "closed segments tier to remote storage and expire from the local log.",
        )
        before = self.produce_and_watch(
            orders,
            lambda t: all(
                p.remote_segment_count >= MIN_SEGMENTS and p.local_log_start_offset > 0
                for p in t.partitions
            ),
        )
        check(before.tiered_epoch == 0, f"tiered epoch {before.tiered_epoch}, expected 0")

        explain(
            "Before: TieredEpoch 0; each partition's remote log starts at offset 0, its local log "
            "much later."
        )
        self.run(self.admin("tiered-topics", "--describe", "--topic", TOPIC))

        p0 = before.partitions[0]
        explain("Offset 0 is no longer in the local log: the broker reads it from remote storage.")
        remote_read = self.run(
            self.admin(
                "tiered-console-consumer",
                "--topic",
                TOPIC,
                "--partition",
                "0",
                "--offset",
                "0",
                "--max-messages",
                "3",
            ),
            capture=True,
        )
        check(
            "order-000000 " in remote_read and "Processed a total of 3 messages" in remote_read,
            "the read from remote storage did not return the first 3 records",
        )
        explain("The newest records are still in the local log.")
        self.run(
            self.admin(
                "tiered-console-consumer",
                "--topic",
                TOPIC,
                "--partition",
                "0",
                "--offset",
                str(p0.log_end_offset - 2),
            )
        )

        objects = sum(self.cluster.remote_objects_by_epoch().values())
        # What the controller counts when the job starts: the RLMM's segments below the new
        # epoch (all of them: they are all of epoch 0), times the objects of each.
        segments = sum(p.remote_segment_count for p in self.describe().partitions)
        counted = segments * len(WRITTEN_BY_EVERY_COPY)
        fast_path = self.cluster.fast_path_max_objects()
        on_spark = counted > fast_path
        how = (
            f"more than bulk.delete.fast.path.max.objects={fast_path}: a Spark job "
            f"{self.cluster.spark_runs_where()}, from start to end"
            if on_spark
            else f"no more than bulk.delete.fast.path.max.objects={fast_path}: it runs in the "
            "controller, without Spark"
        )
        disable = "remote.log.disable.policy=delete,remote.storage.enable=false"
        explain(
            "First a dry run: the same alter, validated and answered with what it would delete "
            "(from the RLMM's totals), changing nothing."
        )
        dry_run = self.run(self.alter_topic(disable, "--dry-run"), capture=True)
        check(
            "would delete below tiered epoch 1: " in dry_run,
            "the dry run did not say what it would delete below tiered epoch 1",
        )
        undisturbed = self.describe()
        check(
            (undisturbed.tiered_state, undisturbed.tiered_epoch) == ("ENABLED", 0),
            f"the dry run changed the topic: {undisturbed.tiered_state} at tiered epoch "
            f"{undisturbed.tiered_epoch}",
        )
        explain(
            "Disable tiered storage with the delete policy. --wait follows DISABLING (tiered_epoch "
            "1, until every",
            f"broker acked), the bulk delete of the {objects} remote objects, and DISABLED.",
            f"The controller counts the job when it starts, from the RLMM: {segments} segments x "
            f"{len(WRITTEN_BY_EVERY_COPY)} objects = {counted},",
            f"{how}.",
        )
        self.run(self.alter_topic(disable, "--wait"))
        self.check_engine(on_spark)

        explain(
            "After: DISABLED at TieredEpoch 1, remote data gone, log start raised to the local log "
            "start."
        )
        self.run(self.admin("tiered-topics", "--describe", "--topic", TOPIC))
        after = self.describe()
        check(
            after.tiered_state == "DISABLED",
            f"tiered_state {after.tiered_state}, expected DISABLED",
        )
        check(after.tiered_epoch == 1, f"tiered_epoch {after.tiered_epoch}, expected 1")
        for old, new in zip(before.partitions, after.partitions, strict=True):
            check(
                new.remote_segment_count == 0 and new.remote_log_size_bytes == 0,
                f"partition {new.partition} still has {new.remote_segment_count} remote segments",
            )
            check(
                new.log_start_offset >= old.local_log_start_offset > 0,
                f"partition {new.partition}: log start {new.log_start_offset}, expected at least "
                f"{old.local_log_start_offset}",
            )
        left = self.cluster.remote_objects_by_epoch()
        check(not left, f"remote objects left after the delete: {dict(left)}")
        say(
            f"  remote storage ({self.cluster.remote_storage}): {objects} objects before, none left"
        )

        explain("Offset 0 is gone for good: a read below the log start is OFFSET_OUT_OF_RANGE.")
        self.run(
            self.admin(
                "tiered-console-consumer",
                "--topic",
                TOPIC,
                "--partition",
                "0",
                "--offset",
                "0",
                "--max-messages",
                "1",
            ),
            expect=1,
        )

        explain("Turn tiered storage back on: ENABLED, tiered_epoch stays 1.")
        self.run(self.alter_topic("remote.storage.enable=true"))

        more = self.dir / "more-orders.txt"
        write_records(more, self.records, MORE_RECORDS, seed=2)
        ends = [p.log_end_offset for p in after.partitions]
        explain(
            f"Produce {MORE_RECORDS} more records: they tier again, stamped with tiered epoch 1."
        )
        self.produce_and_watch(
            more,
            lambda t: all(
                p.local_log_start_offset > end for p, end in zip(t.partitions, ends, strict=True)
            ),
        )
        final = self.describe()
        check(
            final.tiered_state == "ENABLED", f"tiered_state {final.tiered_state}, expected ENABLED"
        )
        check(final.tiered_epoch == 1, f"tiered_epoch {final.tiered_epoch}, expected 1")
        by_epoch = self.cluster.remote_objects_by_epoch()
        check(set(by_epoch) == {"te=1"}, f"remote objects by tiered epoch: {dict(by_epoch)}")
        say(f"  remote storage: {by_epoch['te=1']} objects, all under te=1/ (tiered epoch 1)")

        explain(
            f"The first record produced after the re-enable (offset {ends[0]}) comes from remote "
            "storage."
        )
        self.run(
            self.admin(
                "tiered-console-consumer",
                "--topic",
                TOPIC,
                "--partition",
                "0",
                "--offset",
                str(ends[0]),
                "--max-messages",
                "2",
            )
        )
        self.run(self.admin("tiered-topics", "--describe", "--topic", TOPIC))

        explain(
            "Any Kafka client can do this too: confluent-kafka's AdminClient, on the brokers' "
            "Kafka listeners, turns",
            "tiered storage off with IncrementalAlterConfigs (the retain policy: remote data "
            "stays), and DescribeConfigs",
            "shows the tiered state (DISABLING until every broker acked, then DISABLED).",
        )
        kafka_out = self.run(
            ["python", "-", self.kafka_bootstrap],
            heredoc=KAFKA_ADMIN_SCRIPT.read_text(),
            capture=True,
        )
        check(
            "remote.log.tiered.state=DISABLED remote.log.tiered.epoch=2" in kafka_out,
            "the Kafka AdminClient did not see the topic DISABLED at tiered epoch 2",
        )
        self.run(self.admin("tiered-topics", "--describe", "--topic", TOPIC))
        retained = self.describe()
        check(
            (retained.tiered_state, retained.tiered_epoch) == ("DISABLED", 2),
            f"after the Kafka client's disable: {retained.tiered_state} at tiered epoch "
            f"{retained.tiered_epoch}, expected DISABLED at 2",
        )
        kept = self.cluster.remote_objects_by_epoch()
        check(kept == by_epoch, f"the retain policy kept {dict(kept)}, expected {dict(by_epoch)}")
        say(f"  remote storage: the {sum(kept.values())} objects under te=1/ are kept (retain)")

        explain("Stop the cluster.")
        self.down()
        self.secure.main()

    def check_engine(self, on_spark: bool) -> None:
        """Fails the demo unless the bulk delete ran where the narration said: the controller's
        line naming the job's engine, and in the distributed profile the Spark master's
        applications (on a Spark master the active controller's application is up from its
        activation, whatever engine a job takes: only a Spark job needs it there)."""
        line = self.cluster.engine_log_line(TOPIC, 1)
        if line is None:
            raise DemoError("no controller log line names the engine of the bulk delete")
        say(f"  controller log: {line.text}")
        said = "on Spark" if on_spark else "in process"
        check(
            line.on_spark == on_spark,
            f"the narration said the bulk delete runs {said}, but the controller logged "
            f"{line.text!r}",
        )
        if self.profile != "distributed":
            return
        web = self.cluster.layout["spark_master_web"]
        apps = [a for a in self.cluster.spark_applications() if a["name"] == SPARK_APP_NAME]
        for app in apps:
            say(
                f"  Spark master ({web}/json/): application {app['id']} {app['name']} "
                f"{app['state']}, {app['cores']} cores"
            )
            say(f"    its stages: {self.cluster.spark_stages(app['id'])}")
        if on_spark:
            check(
                bool(apps),
                f"the bulk delete ran on Spark, but the Spark master ({web}/json/) lists no "
                f"{SPARK_APP_NAME} application, active or completed",
            )

    def down(self) -> None:
        self.cluster_down = True
        self.run(["tiered-cluster", "down", "--data-dir", str(self.dir)])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/demo.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=os.environ.get("TIERED_DEMO_DIR") or None,
        help="the cluster's data directory (default: $TIERED_DEMO_DIR, else a new temporary one)",
    )
    parser.add_argument(
        "--records",
        type=int,
        default=int(os.environ.get("TIERED_DEMO_RECORDS") or DEFAULT_RECORDS),
        help=f"records to produce before the disable (default: $TIERED_DEMO_RECORDS, else "
        f"{DEFAULT_RECORDS}; at least {MIN_RECORDS})",
    )
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default=os.environ.get("TIERED_DEMO_PROFILE") or "local",
        help="tiered-cluster up --profile (default: $TIERED_DEMO_PROFILE, else local)",
    )
    args = parser.parse_args(argv)
    if args.records < MIN_RECORDS:
        parser.error(f"--records must be at least {MIN_RECORDS}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = float(os.environ.get("TIERED_DEMO_STARTED_AT") or time.time())
    data_dir = (args.data_dir or Path(tempfile.mkdtemp(prefix="tiered-demo-"))).resolve()
    demo = Demo(data_dir, args.records, started, args.profile)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    status = 0
    try:
        demo.main()
    except (DemoError, SignalledError, KeyboardInterrupt) as e:
        interrupted = not isinstance(e, DemoError)
        status = 130 if interrupted else 1
        say()
        print(
            f"demo: {'interrupted' if interrupted else 'FAILED'}"
            + (f": {e}" if not interrupted else ""),
            file=sys.stderr,
            flush=True,
        )
    finally:
        # Stop the cluster whatever happened; a second Ctrl-C must not cut this short.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if demo.cluster_touched and not demo.cluster_down:
            explain("Stop the cluster.")
            try:
                demo.down()
            except DemoError as e:
                print(f"demo: {e}", file=sys.stderr, flush=True)
                status = status or 1
        if demo.secure.touched:
            explain("Stop the secure cluster.")
            try:
                demo.secure.down()
            except DemoError as e:
                print(f"demo: {e}", file=sys.stderr, flush=True)
                status = status or 1
    took = elapsed_text(time.time() - demo.started)
    if status == 0:
        say()
        say(
            f"Demo done in {took}. Data, configs and logs stay in {data_dir} (logs: {data_dir / 'logs'})."
        )
    else:
        print(f"demo: stopped after {took}; logs are in {data_dir / 'logs'}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
