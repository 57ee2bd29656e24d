"""The broker's Prometheus endpoint, with Kafka's tiered-storage metric names.

Kafka's ``kafka.server:type=BrokerTopicMetrics,name=X,topic=T`` becomes
``kafka_server_brokertopicmetrics_x{topic="T"}`` (the JMX exporter's convention, lower-cased);
Kafka's meters (``...PerSec``) are counters with a ``_total`` suffix, from which Prometheus computes
rates. Values are read when scraped, so the endpoint costs nothing between scrapes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.data_plane import DataPlane
from broker.rlm.model import RemoteLogMetrics
from tiered.metrics_endpoint import MetricsEndpoint

PREFIX = "kafka_server_brokertopicmetrics_"

_METERS = {
    "RemoteCopyBytesPerSec": ("copy_bytes", "bytes copied to remote storage"),
    "RemoteCopyRequestsPerSec": ("copy_requests", "segment copies started"),
    "RemoteCopyErrorsPerSec": ("copy_errors", "segment copies that failed"),
    "RemoteFetchBytesPerSec": ("fetch_bytes", "bytes read from remote storage"),
    "RemoteFetchRequestsPerSec": ("fetch_requests", "reads served from remote storage"),
    "RemoteDeleteRequestsPerSec": ("delete_requests", "remote segments deleted"),
}


class TieredStorageCollector:
    """Collects per-topic figures at scrape time: the partitions' log dirs from the data plane
    and the RemoteLogManager's meters (``remote`` is None when remote storage is off)."""

    def __init__(self, data: DataPlane, remote: RemoteLogMetrics | None) -> None:
        self._data = data
        self._remote = remote

    def collect(self) -> Iterator[Metric]:
        remote = self._remote
        log_dirs = self._data.describe_log_dirs()
        # Every hosted topic appears in every family, at 0 until something happens.
        hosted = {d.topic_id_partition.topic for d in log_dirs}
        if remote is not None:
            for kafka_name, (attribute, help_text) in _METERS.items():
                counter = CounterMetricFamily(
                    PREFIX + kafka_name.lower(), f"{kafka_name}: {help_text}", labels=["topic"]
                )
                counts = getattr(remote, attribute)
                for topic in sorted(hosted | set(counts)):
                    counter.add_metric([topic], counts[topic])
                yield counter
        gauges = {
            "RemoteLogSizeBytes": "bytes in remote storage (every segment not yet deleted)",
            "RemoteLogMetadataCount": "remote segments (every segment not yet deleted)",
            "RemoteCopyLagBytes": "bytes of closed local segments not yet copied",
            "RemoteCopyLagSegments": "closed local segments not yet copied",
        }
        sums: dict[str, dict[str, int]] = {name: defaultdict(int) for name in gauges}
        for d in log_dirs:
            topic = d.topic_id_partition.topic
            sums["RemoteLogSizeBytes"][topic] += d.remote_size_bytes
            sums["RemoteLogMetadataCount"][topic] += d.remote_segment_count
            sums["RemoteCopyLagBytes"][topic] += d.copy_lag_bytes
            sums["RemoteCopyLagSegments"][topic] += d.copy_lag_segments
        for kafka_name, help_text in gauges.items():
            family = GaugeMetricFamily(
                PREFIX + kafka_name.lower(), f"{kafka_name}: {help_text}", labels=["topic"]
            )
            for topic, value in sorted(sums[kafka_name].items()):
                family.add_metric([topic], value)
            yield family


def serve_metrics(
    data: DataPlane, remote: RemoteLogMetrics | None, host: str, port: int
) -> MetricsEndpoint:
    """Starts the endpoint on ``host:port`` (0: any free port); ``MetricsEndpointError`` when it
    cannot listen there."""
    return MetricsEndpoint(host, port, [TieredStorageCollector(data, remote)])
