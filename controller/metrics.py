"""The controller's Prometheus endpoint (``metrics.port``), with Kafka's naming.

Kafka's ``kafka.controller:type=KafkaController,name=ActiveControllerCount`` becomes
``kafka_controller_kafkacontroller_activecontrollercount`` (the JMX exporter's convention,
lower-cased, as the broker's ``broker/metrics.py``); meters (``...PerSec``) are counters with a
``_total`` suffix, and a label such as Kafka's ``broker-id`` is ``broker_id``.

Two kinds of figures:

- events (requests to brokers that failed or were retried, metadata-store writes, admin requests,
  objects the bulk delete removed) update prometheus_client's counters and histograms where they
  happen: ``ControllerMetrics``;
- state (active or not, the controller epoch, topics per tiered state, what brokers owe, when
  each broker was last reached, delete jobs) is read when scraped from figures the controller
  keeps up to date as it changes, so a scrape costs O(brokers + unfinished jobs), not O(topics):
  ``ControllerStateCollector``.

A standby serves the endpoint too: active 0, epoch 0, no topics, no backlog, no jobs (the
active controller reports them; summing over controllers gives the cluster's figures).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from controller.unfinished_jobs import objects_remaining
from tiered.cluster.model import DeleteJob, DeleteJobState, RemoteStorageScrub, TieredState
from tiered.metrics_endpoint import MetricsEndpoint

log = logging.getLogger(__name__)

CONTROLLER = "kafka_controller_kafkacontroller_"
CHANNEL = "kafka_controller_controllerchannelmanager_"
BULK_DELETE = "kafka_controller_bulkdelete_"
REMOTE_VERIFY = "kafka_controller_remotestorageverify_"
REMOTE_SCRUB = "kafka_controller_remotestoragescrub_"
REQUESTS = "kafka_network_requestmetrics_"

# Milliseconds, as Kafka's latency histograms: an fsync'd KRaft batch or a ZooKeeper multi takes
# a few; a store in trouble takes seconds.
WRITE_LATENCY_BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# Topic changes per group-commit write: one client's alter, up to a flood of them.
FLUSH_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000, 25000)


class ControllerMetrics:
    """The event instruments of one controller process, in a registry of its own."""

    def __init__(self, store_mode: str) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._request_failures = Counter(
            CHANNEL + "requestfailurespersec",
            "RequestFailuresPerSec: requests to a broker (DisableRemoteTopic, AssignPartitions, "
            "RemovePartitions) that failed: unreachable, timed out, or answered with errors",
            ["broker_id"],
            registry=self.registry,
        )
        self._request_retries = Counter(
            CHANNEL + "requestretriespersec",
            "RequestRetriesPerSec: requests sent to a broker again after a failure",
            ["broker_id"],
            registry=self.registry,
        )
        self._disable_requests = Counter(
            CHANNEL + "disableremotetopicrequestspersec",
            "DisableRemoteTopicRequestsPerSec: DisableRemoteTopic requests a broker answered",
            ["broker_id"],
            registry=self.registry,
        )
        self._disable_entries = Counter(
            CHANNEL + "disableremotetopicentriespersec",
            "DisableRemoteTopicEntriesPerSec: partitions those requests carried",
            ["broker_id"],
            registry=self.registry,
        )
        self._store_writes = Histogram(
            CONTROLLER + "metadatastorewritelatencyms",
            "MetadataStoreWriteLatencyMs: time of each metadata-store write (a KRaft log batch, "
            "ZooKeeper multis), failed ones included",
            ["store"],
            buckets=WRITE_LATENCY_BUCKETS_MS,
            registry=self.registry,
        ).labels(store_mode)
        self._topic_write_flushes = Histogram(
            CONTROLLER + "topicwriteflushsize",
            "TopicWriteFlushSize: topic changes (alters, completed disablements) persisted by "
            "each group-commit write",
            buckets=FLUSH_SIZE_BUCKETS,
            registry=self.registry,
        )
        self._topic_write_queue = Gauge(
            CONTROLLER + "topicwritequeuedepth",
            "TopicWriteQueueDepth: topic changes that were waiting for the next write when the "
            "last one started",
            registry=self.registry,
        )
        self._requests = Counter(
            REQUESTS + "requestspersec",
            "RequestsPerSec: admin requests answered, by request",
            ["request"],
            registry=self.registry,
        )
        self._errors = Counter(
            REQUESTS + "errorspersec",
            "ErrorsPerSec: errors in admin responses, by request and error name (one per "
            "failed topic or request; NONE once per request that carried no error)",
            ["request", "error"],
            registry=self.registry,
        )
        self._objects_deleted = Counter(
            BULK_DELETE + "objectsdeletedpersec",
            "ObjectsDeletedPerSec: remote objects the bulk delete removed (or found gone)",
            registry=self.registry,
        )
        self._objects_failed = Counter(
            BULK_DELETE + "objectsfailedpersec",
            "ObjectsFailedPerSec: remote objects the bulk delete could not delete (retried)",
            registry=self.registry,
        )
        self._spark_session_up = Gauge(
            BULK_DELETE + "sparksessionup",
            "SparkSessionUp: 1 while this controller's bulk-delete SparkSession is up (on a "
            "cluster master: its application registered with the master), else 0",
            registry=self.registry,
        )
        self._spark_session_starts = Counter(
            BULK_DELETE + "sparksessionstartspersec",
            "SparkSessionStartsPerSec: bulk-delete SparkSessions started (a term's first and "
            "each restart after a loss)",
            registry=self.registry,
        )
        self._spark_session_start_failures = Counter(
            BULK_DELETE + "sparksessionstartfailurespersec",
            "SparkSessionStartFailuresPerSec: attempts to start one that failed (retried with "
            "backoff)",
            registry=self.registry,
        )
        self._spark_session_losses = Counter(
            BULK_DELETE + "sparksessionlostpersec",
            "SparkSessionLostPerSec: sessions found lost (stopped, unknown to the master or "
            "the master unreachable) and restarted",
            registry=self.registry,
        )
        self._spark_session_start_time = Gauge(
            BULK_DELETE + "sparksessionstarttimems",
            "SparkSessionStartTimeMs: how long the last SparkSession took to start",
            registry=self.registry,
        )
        self._scrub_orphan_bytes = Gauge(
            REMOTE_SCRUB + "orphanbytes",
            "OrphanBytes: bytes of the orphaned remote objects the last scrub in this controller "
            "found and left (a scrub with --execute leaves those it failed to delete); 0 before "
            "the first",
            registry=self.registry,
        )
        self._scrub_orphan_objects = Gauge(
            REMOTE_SCRUB + "orphanobjects",
            "OrphanObjects: orphaned remote objects the last scrub in this controller found and "
            "left",
            registry=self.registry,
        )

    # Events. Each costs what prometheus_client's instruments cost, nothing more.

    def request_failed(self, broker_id: int) -> None:
        self._request_failures.labels(str(broker_id)).inc()

    def request_retried(self, broker_id: int) -> None:
        self._request_retries.labels(str(broker_id)).inc()

    def disable_answered(self, broker_id: int, entries: int) -> None:
        self._disable_requests.labels(str(broker_id)).inc()
        self._disable_entries.labels(str(broker_id)).inc(entries)

    def store_written(self, seconds: float) -> None:
        self._store_writes.observe(seconds * 1000)

    def topic_writes_flushed(self, changes: int, queued: int) -> None:
        self._topic_write_flushes.observe(changes)
        self._topic_write_queue.set(queued)

    def admin_answered(self, request: str, errors: Mapping[str, int]) -> None:
        """An admin request was answered with ``errors`` (error name -> occurrences; empty
        for a response without any error)."""
        self._requests.labels(request).inc()
        if not errors:
            self._errors.labels(request, "NONE").inc()
        for name, count in errors.items():
            self._errors.labels(request, name).inc(count)

    def objects_deleted(self, done: int, failed: int) -> None:
        if done:
            self._objects_deleted.inc(done)
        if failed:
            self._objects_failed.inc(failed)

    def remote_storage_scrubbed(self, report: RemoteStorageScrub) -> None:
        objects, size_bytes = report.orphans_left
        self._scrub_orphan_bytes.set(size_bytes)
        self._scrub_orphan_objects.set(objects)

    # The bulk delete's SparkSession (controller.jobs.spark_session.SessionObserver).

    def spark_session_up(self, up: bool) -> None:
        self._spark_session_up.set(1 if up else 0)

    def spark_session_started(self, seconds: float) -> None:
        self._spark_session_starts.inc()
        self._spark_session_start_time.set(round(seconds * 1000))

    def spark_session_start_failed(self) -> None:
        self._spark_session_start_failures.inc()

    def spark_session_lost(self) -> None:
        self._spark_session_losses.inc()


@dataclass(frozen=True)
class BrokerBacklog:
    """What one broker owes: DisableRemoteTopic entries not yet acked, and how long the oldest
    has waited (since this controller's term queued it)."""

    entries: int
    oldest_age_s: float


@dataclass(frozen=True)
class ControllerSnapshot:
    """The state figures of a term, copied at once (empty on a standby)."""

    topics_by_state: Mapping[TieredState, int] = field(
        default_factory=lambda: dict.fromkeys(TieredState, 0)
    )
    disable_backlogs: Mapping[int, BrokerBacklog] = field(default_factory=dict)
    unfinished_jobs: Sequence[DeleteJob] = ()
    # Registered broker -> seconds since this controller last reached it (controller.reachability).
    since_reached_s: Mapping[int, float] = field(default_factory=dict)
    # The periodic verify (remote.storage.verify.interval.ms; controller.periodic_verify).
    verify_segments_checked: int = 0
    verify_segments_missing: int = 0


class ControllerStateCollector:
    """State read at scrape time: the active epoch, then a ``ControllerSnapshot`` the controller
    hands over (``snapshot(lock_timeout_s)``: None when its lock stayed busy that long, and the
    scrape then answers without those figures rather than hang)."""

    def __init__(
        self,
        active_epoch: Callable[[], int | None],
        snapshot: Callable[[float], ControllerSnapshot | None],
        lock_timeout_s: float = 2.0,
    ) -> None:
        self._active_epoch = active_epoch
        self._snapshot = snapshot
        self._lock_timeout_s = lock_timeout_s

    def collect(self) -> Iterator[Metric]:
        epoch = self._active_epoch()
        yield _gauge(
            CONTROLLER + "activecontrollercount",
            "ActiveControllerCount: 1 on the active controller, 0 on a standby",
            1 if epoch is not None else 0,
        )
        yield _gauge(
            CONTROLLER + "controllerepoch",
            "ControllerEpoch: the controller epoch of this controller's term (0 on a standby)",
            epoch or 0,
        )
        snapshot = self._snapshot(self._lock_timeout_s)
        if snapshot is None:
            log.warning(
                "Metrics scrape: the controller lock stayed busy for %.1fs; topic, backlog and "
                "job figures left out of this scrape",
                self._lock_timeout_s,
            )
            return
        topics = snapshot.topics_by_state
        backlogs = snapshot.disable_backlogs
        jobs = snapshot.unfinished_jobs

        yield _gauge(
            CONTROLLER + "globaltopiccount", "GlobalTopicCount: topics", sum(topics.values())
        )
        by_state = GaugeMetricFamily(
            CONTROLLER + "tieredtopiccount",
            "TieredTopicCount: topics per tiered state (ENABLED, DISABLING, DISABLED; a topic "
            "never tiered is DISABLED)",
            labels=["state"],
        )
        for state, count in topics.items():
            by_state.add_metric([state.value], count)
        yield by_state

        entries = GaugeMetricFamily(
            CHANNEL + "disableremotetopicpendingentries",
            "DisableRemoteTopicPendingEntries: partitions a broker has not acked a "
            "DisableRemoteTopic for yet",
            labels=["broker_id"],
        )
        oldest = GaugeMetricFamily(
            CHANNEL + "disableremotetopicoldestpendingagems",
            "DisableRemoteTopicOldestPendingAgeMs: how long the oldest of them has waited, since "
            "this controller's term queued it",
            labels=["broker_id"],
        )
        for broker_id, backlog in sorted(backlogs.items()):
            entries.add_metric([str(broker_id)], backlog.entries)
            oldest.add_metric([str(broker_id)], round(backlog.oldest_age_s * 1000))
        yield entries
        yield oldest

        reached = GaugeMetricFamily(
            CONTROLLER + "timesincelastreachedms",
            "TimeSinceLastReachedMs: how long since this controller last reached a registered "
            "broker: a call to it answered, or its heartbeat or ZooKeeper session heard (not "
            "while what it is owed goes unanswered); since the term began if not yet",
            labels=["broker_id"],
        )
        for broker_id, since_s in sorted(snapshot.since_reached_s.items()):
            reached.add_metric([str(broker_id)], round(since_s * 1000))
        yield reached

        job_count = GaugeMetricFamily(
            BULK_DELETE + "jobcount",
            "JobCount: unfinished bulk-delete jobs (SCHEDULED: delayed, waiting for its start; "
            "PENDING: not started; RUNNING: started, "
            "retried after a failure until done)",
            labels=["state"],
        )
        for job_state in (DeleteJobState.SCHEDULED, DeleteJobState.PENDING, DeleteJobState.RUNNING):
            job_count.add_metric([job_state.value], sum(1 for j in jobs if j.state is job_state))
        yield job_count
        remaining = GaugeMetricFamily(
            BULK_DELETE + "objectsremaining",
            "ObjectsRemaining: objects an unfinished job listed and has not deleted yet",
            labels=["topic", "topic_id", "tiered_epoch"],
        )
        for job in sorted(jobs, key=lambda j: (j.topic, str(j.topic_id), j.tiered_epoch)):
            remaining.add_metric(
                [job.topic, str(job.topic_id), str(job.tiered_epoch)], objects_remaining(job)
            )
        yield remaining

        yield _gauge(
            REMOTE_VERIFY + "segmentschecked",
            "SegmentsChecked: finished segments the periodic verify checked in its last complete "
            "round (in the current one until a round completes); 0 when it is off",
            snapshot.verify_segments_checked,
        )
        yield _gauge(
            REMOTE_VERIFY + "segmentsmissing",
            "SegmentsMissing: finished segments the periodic verify found missing objects of (or "
            "a data object of another size) and has not found whole since",
            snapshot.verify_segments_missing,
        )


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


def serve_metrics(
    metrics: ControllerMetrics, state: ControllerStateCollector, host: str, port: int
) -> MetricsEndpoint:
    """Starts the endpoint on ``host:port`` (0: any free port); ``MetricsEndpointError`` naming
    ``metrics.port`` when it cannot listen there."""
    return MetricsEndpoint(host, port, [metrics.registry, state])
