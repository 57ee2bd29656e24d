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
- the record APIs, on this broker's data plane (``broker.data_plane``): ``produce_api`` (Produce),
  ``fetch_api`` (Fetch, long polls waiting in ``fetch_waits``), ``offsets_api`` (ListOffsets),
  ``delete_records_api`` (DeleteRecords), ``producer_ids`` (InitProducerId); ``partitions``
  finds the partitions they name.

Requests and responses are kio's; what crosses to the controller is protobuf, converted in those
modules; domain rules stay with the controller and ``tiered.config``. Metadata and the record
APIs are authorized here, by ``access`` (this broker's ACLs). What the APIs share (the cluster
view, the consumer groups, the waiting fetches, the producer id blocks) is built and wired by
the broker's composition root (``broker.broker``) and handed over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView
from broker.config import TopicAutoCreation
from broker.groups.consumer_groups import ConsumerGroups
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
from broker.kafka.partitions import HostedByName, PartitionLookup
from broker.kafka.produce_api import Appender, ProduceApi
from broker.kafka.producer_ids import InitProducerIdApi, ProducerIdBlocks
from broker.kafka.scram_api import ScramApi
from broker.kafka.this_broker import ThisBroker
from broker.kafka.topic_auto_creation import TopicAutoCreator
from broker.kafka.topics_api import TopicsApi
from broker.listener.handler import HandlerResult, RequestContext
from tiered.security.access import AccessControl
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.forwarding import forwarding_for

__all__ = ["ALLOW_ALL", "BrokerKafkaHandler", "Records"]

ALLOW_ALL = AccessControl(StandardAuthorizer(AuthorizerConfig(), AclIndex))
"""A handler's access control without an authorizer (``authorizer.enabled=false``)."""

Api = Callable[[Any, RequestContext], HandlerResult]


def _as_client(api: Api) -> Api:
    """An API forwarded to the controller, which judges it as the client (Kafka's envelope)."""

    def forward(request: Any, context: RequestContext) -> HandlerResult:
        with forwarding_for(context.requester):
            return api(request, context)

    return forward


class Records(Appender, Reader, TimestampSearch, RecordDeleter, Protocol):
    """What the record APIs call on the broker's data plane (``broker.data_plane.DataPlane``)."""


class BrokerKafkaHandler:
    def __init__(
        self,
        this: ThisBroker,
        controller: ControllerAdmin,
        view: ClusterView,
        access: AccessControl,
        hosted: HostedByName,
        records: Records,
        waits: FetchWaits[ResponsePayload | None],
        groups: ConsumerGroups,
        local_partitions: Callable[[], Iterable[LocalPartition]],
        producer_ids: ProducerIdBlocks,
        topic_auto_creation: TopicAutoCreation,
    ) -> None:
        """``view``: the cluster as the controller's image has it; ``hosted``: the partitions
        hosted here, by name; ``waits``: told of every append already; ``groups``: started;
        ``local_partitions``: each hosted partition's local size, for DescribeLogDirs;
        ``topic_auto_creation``: the broker's ``auto.create.topics.enable`` and
        ``num.partitions``."""
        self._waits = waits
        self._groups = groups
        creator = TopicAutoCreator(controller, view, access, topic_auto_creation)
        cluster = MetadataApi(view, this, access, creator)
        self.metadata = cluster.metadata
        self.describe_cluster = cluster.describe_cluster
        self.find_coordinator = FindCoordinatorApi(groups.topic, view, access).find_coordinator
        offsets = OffsetsApi(
            groups.topic,
            groups.store,
            groups.coordinator,
            view,
            access,
            groups.offsets_config.metadata_max_bytes,
        )
        self.offset_commit = offsets.offset_commit
        self.offset_fetch = offsets.offset_fetch
        self.offset_delete = offsets.offset_delete
        self.delete_groups = offsets.delete_groups
        topics = TopicsApi(controller, view)
        self.create_topics = _as_client(topics.create_topics)
        self.delete_topics = _as_client(topics.delete_topics)
        self.create_partitions = _as_client(CreatePartitionsApi(controller, view).create_partitions)
        configs = ConfigApi(controller, this)
        self.describe_configs = _as_client(configs.describe_configs)
        self.alter_configs = _as_client(configs.alter_configs)
        self.incremental_alter_configs = _as_client(configs.incremental_alter_configs)
        acls = AclsApi(controller)
        self.create_acls = _as_client(acls.create_acls)
        self.describe_acls = _as_client(acls.describe_acls)
        self.delete_acls = _as_client(acls.delete_acls)
        log_dirs = LogDirsApi(this.log_dir, local_partitions, access)
        self.describe_log_dirs = log_dirs.describe_log_dirs
        scram = ScramApi(controller)
        self.alter_user_scram_credentials = scram.alter_user_scram_credentials
        self.describe_user_scram_credentials = scram.describe_user_scram_credentials
        partitions = PartitionLookup(hosted, view, this.node_id, access)
        self.produce = ProduceApi(records, partitions).produce
        self.fetch = FetchApi(records, partitions, waits).fetch
        self.list_offsets = ListOffsetsApi(records, partitions).list_offsets
        self.delete_records = DeleteRecordsApi(records, partitions).delete_records
        self.init_producer_id = InitProducerIdApi(producer_ids, access).init_producer_id
        group_apis = GroupsApi(groups.coordinator, access)
        self.join_group = group_apis.join_group
        self.sync_group = group_apis.sync_group
        self.heartbeat = group_apis.heartbeat
        self.leave_group = group_apis.leave_group
        self.describe_groups = group_apis.describe_groups
        self.list_groups = group_apis.list_groups

    def waiting_fetches(self) -> int:
        """Fetches waiting for data now."""
        return self._waits.waiting()

    def close(self) -> None:
        """Answers no more waiting fetches (their connections close) and stops the groups and
        the offsets' upkeep; call once the listener has stopped."""
        self._waits.close()
        self._groups.close()
