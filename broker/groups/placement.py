"""Where a group lives: the partition of ``__consumer_offsets`` its id maps to (Kafka's
``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``, with Java's
``String.hashCode``), whose leader is the group's coordinator.

The topic is created through the active controller when first needed (on a FindCoordinator,
as Kafka does), with ``offsets.topic.num.partitions`` partitions, compacted and never tiered;
its partitions are placed by the controller as any topic's. Its partition count, once known,
is kept: a coordinator answers its groups from its own hosting, without asking the controller.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView, TopicPlacement
from broker.groups.offsets_config import OffsetsConfig
from tiered.config import OFFSETS_TOPIC
from tiered.errors import ErrorCode as TieredCode
from tiered.errors import TieredError
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = [
    "OFFSETS_TOPIC",
    "OffsetsTopic",
    "java_string_hash",
    "partition_for",
]

_log = logging.getLogger(__name__)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, in 32-bit two's complement."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=65536)  # every group request maps its group id again
def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(hash) % partitions`` (``Utils.abs(Integer.MIN_VALUE)`` is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def offsets_topic_configs(config: OffsetsConfig) -> dict[str, str]:
    """Kafka's configs of ``__consumer_offsets``: compacted, never tiered whatever the cluster
    default, nothing expired by time or size (the store removes what is dead)."""
    return {
        "cleanup.policy": "compact",
        "remote.storage.enable": "false",
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "segment.bytes": str(config.segment_bytes),
    }


class OffsetsTopic:
    """``__consumer_offsets`` as this broker sees it. Thread-safe."""

    def __init__(
        self,
        view: ClusterView,
        controller: ControllerAdmin,
        config: OffsetsConfig,
        node_id: int,
        partition_error: Callable[[int], ErrorCode],
    ) -> None:
        """``partition_error(index)``: NONE when this broker serves that partition's groups now,
        else NOT_COORDINATOR (not hosted here) or COORDINATOR_LOAD_IN_PROGRESS
        (``OffsetStore``)."""
        self._view = view
        self._controller = controller
        self._config = config
        self._node_id = node_id
        self._partition_error = partition_error
        # replicas[p]: the leader of partition p. Partitions never move (replication factor 1,
        # and the topic cannot be deleted): once known, this is never stale.
        self._leaders: tuple[int, ...] | None = None
        self._lock = threading.Lock()

    def partition_of(self, group_id: str) -> int | None:
        """The partition ``group_id`` maps to; None while the topic does not exist."""
        leaders = self._leaders
        if leaders is None:
            found = self.placement(create=False)
            leaders = found.leaders if isinstance(found, _Found) else None
        return None if leaders is None else partition_for(group_id, len(leaders))

    def known_partition_of(self, group_id: str) -> int | None:
        """:meth:`partition_of` without asking the controller: None until the topic's placement
        is known here (no group of it is served here before then)."""
        leaders = self._leaders
        return None if leaders is None else partition_for(group_id, len(leaders))

    def coordinates(self, group_id: str) -> ErrorCode:
        """NONE if this broker is ``group_id``'s coordinator now, else what every group API
        answers first: NOT_COORDINATOR (another broker leads the group's partition),
        COORDINATOR_LOAD_IN_PROGRESS (this one does, and loads it or is about to host it:
        FindCoordinator names the leader as soon as the controller placed it), or
        COORDINATOR_NOT_AVAILABLE while the topic does not exist."""
        index = self.partition_of(group_id)
        if index is None:
            return ErrorCode.coordinator_not_available
        error = self._partition_error(index)
        leaders = self._leaders
        if error is ErrorCode.not_coordinator and leaders and leaders[index] == self._node_id:
            return ErrorCode.coordinator_load_in_progress
        return error

    def placement(self, *, create: bool) -> _Found | TieredError:
        """The topic's placement, created first if missing and ``create``; the error when the
        controller cannot say (or the topic is missing and not to be created)."""
        try:
            found = self._view.topics([OFFSETS_TOPIC]).topics.get(OFFSETS_TOPIC)
        except TieredError as e:
            return e
        if isinstance(found, TieredError) and (
            found.code is TieredCode.UNKNOWN_TOPIC_OR_PARTITION and create
        ):
            created = self._create()
            if created is not None:
                return created
            try:
                found = self._view.topics([OFFSETS_TOPIC]).topics.get(OFFSETS_TOPIC)
            except TieredError as e:
                return e
        if not isinstance(found, TopicPlacement):
            return found or TieredError(
                TieredCode.UNKNOWN_TOPIC_OR_PARTITION, f"{OFFSETS_TOPIC} does not exist"
            )
        with self._lock:
            self._leaders = tuple(found.replicas)
        return _Found(found)

    def _create(self) -> TieredError | None:
        """Creates the topic through the active controller (as this broker, not as the client
        that asked: the internal topic is the cluster's); one that exists already is fine."""
        request = pb.CreateTopicsRequest(
            topics=[
                pb.NewTopic(
                    name=OFFSETS_TOPIC,
                    partitions=self._config.num_partitions,
                    configs=offsets_topic_configs(self._config),
                )
            ]
        )
        try:
            response = self._controller.call("CreateTopics", request, pb.CreateTopicsResponse)
        except TieredError as e:
            return e
        self._view.invalidate()
        error = error_from_proto(response.results[0].error) if response.results else None
        if error is not None and error.code is not TieredCode.TOPIC_ALREADY_EXISTS:
            _log.warning("Could not create %s: %s", OFFSETS_TOPIC, error)
            return error
        if error is None:
            _log.info("Created %s with %d partitions", OFFSETS_TOPIC, self._config.num_partitions)
        return None


class _Found:
    """The topic's placement: ``leader(index)`` is the broker hosting partition ``index``."""

    def __init__(self, placement: TopicPlacement) -> None:
        self.leaders = tuple(placement.replicas)

    @property
    def partitions(self) -> int:
        return len(self.leaders)

    def leader(self, index: int) -> int:
        return self.leaders[index]
