"""One broker's consumer groups, built together because each part asks another: where a group
lives (``OffsetsTopic``: its partition of ``__consumer_offsets``, whose leader coordinates it),
its membership (``GroupCoordinator``, whose records a ``GroupWriter`` appends through the store)
and the committed offsets (``OffsetStore``, on the ``__consumer_offsets`` partitions hosted
here). The topic and the coordinator ask the store which partitions it serves and which groups
have offsets; the store hands the coordinator the groups each partition brings back as it loads.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView
from broker.groups.coordinator import GroupCoordinator
from broker.groups.group_config import GroupConfig
from broker.groups.group_records import StoredGroup
from broker.groups.group_writer import GroupWriter
from broker.groups.offset_store import OffsetStore
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.placement import OFFSETS_TOPIC, OffsetsTopic
from broker.hosted_partitions import HostedPartitions
from broker.log import Log
from tiered.api import TopicIdPartition
from tiered.errors import TieredError

__all__ = ["ConsumerGroups"]


class ConsumerGroups:
    """``start()`` the offsets' upkeep once built; ``close()`` when done."""

    def __init__(
        self,
        view: ClusterView,
        controller: ControllerAdmin,
        node_id: int,
        offsets_config: OffsetsConfig,
        group_config: GroupConfig,
        partitions: HostedPartitions,
    ) -> None:
        self.offsets_config = offsets_config
        self._view = view
        self._partitions = partitions
        self.topic = OffsetsTopic(view, controller, offsets_config, node_id, self._partition_error)
        self.coordinator = GroupCoordinator(
            self.topic.coordinates,
            self._groups_with_offsets,
            group_config,
            writer=GroupWriter(self._store_group),
            # Asked under the coordinator's lock, which must not wait for the controller.
            partition_of=self.topic.known_partition_of,
        )
        self.store = OffsetStore(
            self._offsets_log,
            self._offsets_partitions,
            offsets_config,
            self.coordinator,
            self._topic_ids,
            partition_of=self.topic.partition_of,
        )

    # The topic and the coordinator are built before the store, which hands the coordinator
    # the groups of each partition it loads; they ask the store back.

    def _partition_error(self, index: int) -> ErrorCode:
        found = self.store.partition(index)
        return found if isinstance(found, ErrorCode) else ErrorCode.none

    def _groups_with_offsets(self) -> list[str]:
        return self.store.groups()

    def _store_group(self, group_id: str, record: StoredGroup) -> ErrorCode:
        return self.store.store_group(group_id, record)

    def _offsets_log(self, index: int) -> Log | None:
        hosted = self._partitions.hosted_by_name(OFFSETS_TOPIC, index)
        return None if hosted is None else hosted.log

    def _offsets_partitions(self) -> list[int]:
        return [
            hosted.topic_id_partition.partition
            for hosted in self._partitions.all()
            if hosted.topic_id_partition.topic == OFFSETS_TOPIC
        ]

    def _topic_ids(self) -> dict[str, uuid.UUID] | None:
        """Every topic's id by name, listed now: a cached listing may predate a topic whose
        offsets were committed since (the store removes offsets of topics missing from a listing
        taken after their commit)."""
        self._view.invalidate()
        try:
            return self._view.everything(stale_ok=False).topic_ids()
        except TieredError:
            return None

    def hosted(self, tp: TopicIdPartition) -> None:
        """A partition newly hosted here: one of ``__consumer_offsets`` is loaded now, so that
        its groups are served at once."""
        if tp.topic == OFFSETS_TOPIC:
            self.store.partition(tp.partition)

    def start(self) -> None:
        self.store.start()

    def close(self) -> None:
        """Answers waiting members, stops the group writes and the offsets' upkeep."""
        self.coordinator.close()
        self.store.close()
