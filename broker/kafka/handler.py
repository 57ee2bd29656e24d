"""The broker's KafkaHandler (``broker.listener.handler``): one method per Kafka API, each handed to
the module that answers it.

- ``metadata_api``: Metadata, DescribeCluster (the cluster as the controller's image has it,
  through ``cluster_view``'s short-lived cache), creating the missing topics a Metadata request
  may create (``topic_auto_creation``);
- committed offsets (``broker.groups``): ``find_coordinator_api`` (FindCoordinator),
  ``offsets_commit_api`` (OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups), on the
  ``__consumer_offsets`` partitions this broker hosts (``OffsetStore``), whose leaders are the
  groups' coordinators (``placement``);
- ``topics_api``: CreateTopics, DeleteTopics; ``create_partitions_api``: CreatePartitions;
  ``config_api``: DescribeConfigs, AlterConfigs,
  IncrementalAlterConfigs; ``scram_api``: AlterUserScramCredentials,
  DescribeUserScramCredentials; ``acls_api``: CreateAcls, DescribeAcls, DeleteAcls; all
  forwarded to the active controller (``ControllerAdmin``), which judges them as the client;
- ``log_dirs_api``: DescribeLogDirs, from this broker's own partitions;
- ``groups_api``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups, on
  this broker's ``GroupCoordinator`` (``broker.groups``);
- the record APIs, on this broker's logs (``BrokerAgent``): ``produce_api`` (Produce),
  ``fetch_api`` (Fetch, long polls waiting in ``fetch_waits``), ``offsets_api`` (ListOffsets),
  ``delete_records_api`` (DeleteRecords), ``producer_ids`` (InitProducerId); ``partitions``
  finds the partitions they name.

Requests and responses are kio's; what crosses to the controller is protobuf, converted in those
modules; domain rules stay with the controller and ``tiered.config``. Metadata and the record
APIs are authorized here, by ``access`` (this broker's ACLs).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView
from broker.config import TopicAutoCreation
from broker.groups.coordinator import GroupCoordinator
from broker.groups.group_config import GroupConfig
from broker.groups.group_records import StoredGroup
from broker.groups.group_writer import GroupWriter
from broker.groups.offset_store import OffsetStore
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.placement import OFFSETS_TOPIC, OffsetsTopic
from broker.kafka.acls_api import AclsApi
from broker.kafka.config_api import ConfigApi
from broker.kafka.create_partitions_api import CreatePartitionsApi
from broker.kafka.delete_records_api import DeleteRecordsApi, RecordDeleter
from broker.kafka.fetch_api import FetchApi, Reader
from broker.kafka.fetch_waits import FetchWaits
from broker.kafka.find_coordinator_api import FindCoordinatorApi
from broker.kafka.groups_api import GroupsApi
from broker.kafka.log_dirs_api import LocalPartition, LogDirsApi
from broker.kafka.metadata_api import MetadataApi
from broker.kafka.offsets_api import ListOffsetsApi, TimestampSearch
from broker.kafka.offsets_commit_api import OffsetsApi
from broker.kafka.partitions import HostingAgent, PartitionLookup
from broker.kafka.produce_api import Appender, ProduceApi
from broker.kafka.producer_ids import InitProducerIdApi, ProducerIdBlocks
from broker.kafka.scram_api import ScramApi
from broker.kafka.this_broker import ThisBroker
from broker.kafka.topic_auto_creation import TopicAutoCreator
from broker.kafka.topics_api import TopicsApi
from broker.listener.handler import HandlerResult, RequestContext
from broker.log import Log
from tiered.api import TopicIdPartition
from tiered.errors import TieredError
from tiered.security.access import AccessControl
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.forwarding import forwarding_for

__all__ = ["ALLOW_ALL", "BrokerKafkaHandler", "DataAgent"]

ALLOW_ALL = AccessControl(StandardAuthorizer(AuthorizerConfig(), AclIndex))
"""A handler's access control without an authorizer (``authorizer.enabled=false``)."""

Api = Callable[[Any, RequestContext], HandlerResult]


def _as_client(api: Api) -> Api:
    """An API forwarded to the controller, which judges it as the client (Kafka's envelope)."""

    def forward(request: Any, context: RequestContext) -> HandlerResult:
        with forwarding_for(context.requester):
            return api(request, context)

    return forward


class DataAgent(HostingAgent, Appender, Reader, TimestampSearch, RecordDeleter, Protocol):
    """What the record APIs use of ``BrokerAgent``."""

    def on_append(self, listener: Callable[[TopicIdPartition, int], None]) -> None: ...

    def on_hosting(self, listener: Callable[[TopicIdPartition], None]) -> None: ...


class BrokerKafkaHandler:
    def __init__(
        self,
        this: ThisBroker,
        controller: ControllerAdmin,
        local_partitions: Callable[[], Iterable[LocalPartition]],
        agent: DataAgent,
        metadata_max_age_s: float = 1.0,
        access: AccessControl = ALLOW_ALL,
        group_config: GroupConfig | None = None,
        topic_auto_creation: TopicAutoCreation | None = None,
    ) -> None:
        """``topic_auto_creation``: the broker's ``auto.create.topics.enable`` and
        ``num.partitions`` (None: Kafka's defaults)."""
        view = ClusterView(controller, metadata_max_age_s)
        creator = TopicAutoCreator(
            controller, view, access, topic_auto_creation or TopicAutoCreation()
        )
        cluster = MetadataApi(view, this, access, creator)
        topics = TopicsApi(controller, view)
        configs = ConfigApi(controller, this)
        acls = AclsApi(controller)
        log_dirs = LogDirsApi(this.log_dir, local_partitions, access)
        partitions = PartitionLookup(agent, view, this.node_id, access)
        self._waits: FetchWaits[ResponsePayload | None] = FetchWaits()
        agent.on_append(lambda tp, size: self._waits.appended((tp.topic_id, tp.partition), size))
        self.metadata = cluster.metadata
        self.describe_cluster = cluster.describe_cluster
        offsets_config = OffsetsConfig.from_properties(this.properties)
        offsets_topic = OffsetsTopic(
            view,
            controller,
            offsets_config,
            this.node_id,
            lambda index: _served(self.offset_store, index),
        )

        # The store is made below: it asks the coordinator of groups.
        def groups_with_offsets() -> list[str]:
            return self.offset_store.groups()

        def store_group(group_id: str, record: StoredGroup) -> KafkaErrorCode:
            return self.offset_store.store_group(group_id, record)

        self.groups = GroupCoordinator(
            offsets_topic.coordinates,
            groups_with_offsets,
            group_config,
            writer=GroupWriter(store_group),
            # Asked under the coordinator's lock, which must not wait for the controller.
            partition_of=offsets_topic.known_partition_of,
        )
        self.offset_store = OffsetStore(
            lambda index: _offsets_log(agent, index),
            lambda: (p for t, p, _ in local_partitions() if t == OFFSETS_TOPIC),
            offsets_config,
            self.groups,
            lambda: _topic_ids(view),
            partition_of=offsets_topic.partition_of,
        )
        self.find_coordinator = FindCoordinatorApi(offsets_topic, view, access).find_coordinator
        offsets = OffsetsApi(
            offsets_topic,
            self.offset_store,
            self.groups,
            view,
            access,
            offsets_config.metadata_max_bytes,
        )
        self.offset_commit = offsets.offset_commit
        self.offset_fetch = offsets.offset_fetch
        self.offset_delete = offsets.offset_delete
        self.delete_groups = offsets.delete_groups
        store = self.offset_store

        def hosting(tp: TopicIdPartition) -> None:
            if tp.topic == OFFSETS_TOPIC:
                store.partition(tp.partition)  # loaded now: its groups are served at once

        agent.on_hosting(hosting)
        self.offset_store.start()
        self.create_topics = _as_client(topics.create_topics)
        self.delete_topics = _as_client(topics.delete_topics)
        self.create_partitions = _as_client(CreatePartitionsApi(controller, view).create_partitions)
        self.describe_configs = _as_client(configs.describe_configs)
        self.alter_configs = _as_client(configs.alter_configs)
        self.incremental_alter_configs = _as_client(configs.incremental_alter_configs)
        self.create_acls = _as_client(acls.create_acls)
        self.describe_acls = _as_client(acls.describe_acls)
        self.delete_acls = _as_client(acls.delete_acls)
        self.describe_log_dirs = log_dirs.describe_log_dirs
        scram = ScramApi(controller)
        self.alter_user_scram_credentials = scram.alter_user_scram_credentials
        self.describe_user_scram_credentials = scram.describe_user_scram_credentials
        self.produce = ProduceApi(agent, partitions).produce
        self.fetch = FetchApi(agent, partitions, self._waits).fetch
        self.list_offsets = ListOffsetsApi(agent, partitions).list_offsets
        self.delete_records = DeleteRecordsApi(agent, partitions).delete_records
        self.init_producer_id = InitProducerIdApi(
            ProducerIdBlocks(this.node_id, this.log_dir), access
        ).init_producer_id
        groups = GroupsApi(self.groups, access)
        self.join_group = groups.join_group
        self.sync_group = groups.sync_group
        self.heartbeat = groups.heartbeat
        self.leave_group = groups.leave_group
        self.describe_groups = groups.describe_groups
        self.list_groups = groups.list_groups

    def waiting_fetches(self) -> int:
        """Fetches waiting for data now."""
        return self._waits.waiting()

    def close(self) -> None:
        """Answers no more waiting fetches (their connections close) and stops the offsets'
        upkeep; call once the listener has stopped."""
        self._waits.close()
        self.groups.close()
        self.offset_store.close()


def _offsets_log(agent: DataAgent, index: int) -> Log | None:
    hosted = agent.hosted_by_name(OFFSETS_TOPIC, index)
    return None if hosted is None else hosted.log


def _served(store: OffsetStore, index: int) -> KafkaErrorCode:
    found = store.partition(index)
    return found if isinstance(found, KafkaErrorCode) else KafkaErrorCode.none


def _topic_ids(view: ClusterView) -> dict[str, uuid.UUID] | None:
    """Every topic's id by name, listed now: a cached listing may predate a topic whose offsets
    were committed since (the store removes offsets of topics missing from a listing taken
    after their commit)."""
    view.invalidate()
    try:
        return view.everything().topic_ids()
    except TieredError:
        return None
