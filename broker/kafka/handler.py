"""The broker's KafkaHandler (``tiered.kafka.handler``): one method per Kafka API, each handed to
the module that answers it.

- ``metadata_api``: Metadata, DescribeCluster, FindCoordinator (the cluster as the controller's
  image has it, through ``cluster_view``'s short-lived cache);
- ``topics_api``: CreateTopics, DeleteTopics; ``config_api``: DescribeConfigs, AlterConfigs,
  IncrementalAlterConfigs; all forwarded to the active controller (``ControllerAdmin``);
- ``log_dirs_api``: DescribeLogDirs, from this broker's own partitions;
- ``not_served``: Produce, Fetch, ListOffsets, InitProducerId until the log holds Kafka record
  batches (``data`` below: pass the real ones then).

Requests and responses are kio's; what crosses to the controller is protobuf, converted in those
modules; domain rules stay with the controller and ``tiered.config``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from broker.admin_forwarder import ControllerAdmin
from broker.kafka.cluster_view import ClusterView
from broker.kafka.config_api import ConfigApi
from broker.kafka.log_dirs_api import LocalPartition, LogDirsApi
from broker.kafka.metadata_api import MetadataApi
from broker.kafka.not_served import NotServedYet
from broker.kafka.this_broker import ThisBroker
from broker.kafka.topics_api import TopicsApi
from tiered.kafka.handler import HandlerResult, RequestContext

__all__ = ["BrokerKafkaHandler", "DataApis"]


class DataApis(Protocol):
    """The record APIs (the log's side of the broker)."""

    def produce(self, request: Any, context: RequestContext) -> HandlerResult: ...

    def fetch(self, request: Any, context: RequestContext) -> HandlerResult: ...

    def list_offsets(self, request: Any, context: RequestContext) -> HandlerResult: ...

    def init_producer_id(self, request: Any, context: RequestContext) -> HandlerResult: ...


class BrokerKafkaHandler:
    def __init__(
        self,
        this: ThisBroker,
        controller: ControllerAdmin,
        local_partitions: Callable[[], Iterable[LocalPartition]],
        data: DataApis | None = None,
        metadata_max_age_s: float = 1.0,
    ) -> None:
        view = ClusterView(controller, metadata_max_age_s)
        cluster = MetadataApi(view, this)
        topics = TopicsApi(controller, view)
        configs = ConfigApi(controller, this)
        log_dirs = LogDirsApi(this.log_dir, local_partitions)
        data = data or NotServedYet()
        self.metadata = cluster.metadata
        self.describe_cluster = cluster.describe_cluster
        self.find_coordinator = cluster.find_coordinator
        self.create_topics = topics.create_topics
        self.delete_topics = topics.delete_topics
        self.describe_configs = configs.describe_configs
        self.alter_configs = configs.alter_configs
        self.incremental_alter_configs = configs.incremental_alter_configs
        self.describe_log_dirs = log_dirs.describe_log_dirs
        self.produce = data.produce
        self.fetch = data.fetch
        self.list_offsets = data.list_offsets
        self.init_producer_id = data.init_producer_id
