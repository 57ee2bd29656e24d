"""The BrokerService gRPC servicer: converts protobuf at the edge and calls ``Hosting`` (the
controller's calls) or the ``DataPlane`` (records, offsets, log dirs).

Domain errors (TieredError) come back as an ``Error`` in the response with Kafka's code and name;
a malformed request is INVALID_ARGUMENT; anything unexpected is logged and INTERNAL. Every call is
authorized first (a denial is PERMISSION_DENIED): the controller's (AssignPartitions,
DisableRemoteTopic, RemovePartitions) need ClusterAction on the cluster; Produce needs Write on
the topic, Fetch Read, ListOffsets Describe; DescribeLogDirs ClusterAction or Describe on the
cluster.
"""

from __future__ import annotations

import logging
import uuid
from typing import TypeVar

import grpc

from broker.data_plane import DataPlane, PartitionOffsets
from broker.hosted import PartitionStop, check_partition
from broker.hosted_partitions import HostedPartitions
from broker.hosting import Hosting
from tiered.config import RemoteLogDisablePolicy
from tiered.errors import ErrorCode, TieredError
from tiered.rlmm.serde import topic_id_partition_from_proto, topic_id_partition_to_proto
from tiered.rpc.status import error_to_proto, handle
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import records_pb2
from tiered.security.access import AccessControl
from tiered.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from tiered.security.grpc_context import grpc_request_context

log = logging.getLogger(__name__)

R = TypeVar("R")


def offsets_to_proto(offsets: PartitionOffsets) -> pb.PartitionOffsets:
    return pb.PartitionOffsets(
        log_start_offset=offsets.log_start_offset,
        local_log_start_offset=offsets.local_log_start_offset,
        log_end_offset=offsets.log_end_offset,
    )


def _partition_key(partition: records_pb2.TopicIdPartition) -> tuple[uuid.UUID, int]:
    try:
        return uuid.UUID(bytes=partition.topic_id), partition.partition
    except ValueError:
        raise ValueError("topic_id must be 16 bytes") from None


def _stop_from_proto(entry: pb.DisableRemoteTopicEntry) -> PartitionStop | TieredError:
    """One DisableRemoteTopic entry, its policy parsed once, here; a policy that is not valid
    fails only its entry (INVALID_REQUEST), a malformed partition the whole request."""
    topic_id, partition = _partition_key(entry.partition)
    check_partition(topic_id, partition)
    try:
        policy = RemoteLogDisablePolicy.parse(entry.policy)
    except ValueError as e:
        return TieredError(ErrorCode.INVALID_REQUEST, str(e))
    return PartitionStop(topic_id, partition, entry.tiered_epoch, policy)


class BrokerServicer(pb_grpc.BrokerServiceServicer):
    def __init__(
        self,
        hosting: Hosting,
        partitions: HostedPartitions,
        data: DataPlane,
        access: AccessControl,
    ) -> None:
        self._hosting = hosting
        self._partitions = partitions
        self._data = data
        self._access = access

    def _require_cluster(self, context: grpc.ServicerContext, *operations: AclOperation) -> None:
        """Any one of ``operations`` on the cluster, for the caller itself."""
        caller = grpc_request_context(context)
        denials = [
            self._access.denial(caller, op, ResourceType.CLUSTER, CLUSTER_NAME) for op in operations
        ]
        if all(denials):
            raise denials[0]  # type: ignore[misc]

    def _require_topic(
        self,
        context: grpc.ServicerContext,
        operation: AclOperation,
        topic_id: uuid.UUID,
        partition: int,
    ) -> None:
        topic = self._partitions.hosted(topic_id, partition).topic_id_partition.topic
        self._access.require(grpc_request_context(context), operation, ResourceType.TOPIC, topic)

    def Produce(
        self, request: pb.ProduceRequest, context: grpc.ServicerContext
    ) -> pb.ProduceResponse:
        def call() -> pb.ProduceResponse:
            topic_id, partition = _partition_key(request.partition)
            self._require_topic(context, AclOperation.WRITE, topic_id, partition)
            info = self._data.produce(topic_id, partition, request.records)
            return pb.ProduceResponse(
                error=error_to_proto(None),
                base_offset=info.first_offset,
                last_offset=info.last_offset,
                log_start_offset=info.log_start_offset,
                duplicate=info.duplicate,
            )

        return handle(context, call, lambda e: pb.ProduceResponse(error=error_to_proto(e)))

    def Fetch(self, request: pb.FetchRequest, context: grpc.ServicerContext) -> pb.FetchResponse:
        def call() -> pb.FetchResponse:
            topic_id, partition = _partition_key(request.partition)
            self._require_topic(context, AclOperation.READ, topic_id, partition)
            read, remote = self._data.fetch(
                topic_id, partition, request.offset, request.max_bytes or 1024 * 1024
            )
            return pb.FetchResponse(
                error=error_to_proto(None),
                records=bytes(read.records),
                offsets=offsets_to_proto(self._data.offsets(topic_id, partition)),
                from_remote=remote,
            )

        return handle(context, call, lambda e: pb.FetchResponse(error=error_to_proto(e)))

    def ListOffsets(
        self, request: pb.ListOffsetsRequest, context: grpc.ServicerContext
    ) -> pb.ListOffsetsResponse:
        def call() -> pb.ListOffsetsResponse:
            topic_id, partition = _partition_key(request.partition)
            self._require_topic(context, AclOperation.DESCRIBE, topic_id, partition)
            response = pb.ListOffsetsResponse(
                error=error_to_proto(None),
                offsets=offsets_to_proto(self._data.offsets(topic_id, partition)),
                timestamp_offset=-1,
                found_timestamp_ms=-1,
            )
            if request.HasField("timestamp_ms"):
                found = self._data.offset_for_timestamp(topic_id, partition, request.timestamp_ms)
                if found is not None:
                    response.timestamp_offset = found.offset
                    response.found_timestamp_ms = found.timestamp_ms
            return response

        return handle(context, call, lambda e: pb.ListOffsetsResponse(error=error_to_proto(e)))

    def DescribeLogDirs(
        self, request: pb.DescribeLogDirsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeLogDirsResponse:
        def call() -> pb.DescribeLogDirsResponse:
            self._require_cluster(context, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE)
            return pb.DescribeLogDirsResponse(
                partitions=[
                    pb.PartitionLogDir(
                        partition=topic_id_partition_to_proto(d.topic_id_partition),
                        offsets=offsets_to_proto(d.offsets),
                        local_size_bytes=d.local_size_bytes,
                        remote_size_bytes=d.remote_size_bytes,
                        remote_segment_count=d.remote_segment_count,
                        remote_copy_finished_bytes=d.remote_copy_finished_bytes,
                        tiered_epoch=d.tiered_epoch,
                        copying=d.copying,
                        remote_fetch_enabled=d.remote_fetch_enabled,
                        copy_lag_bytes=d.copy_lag_bytes,
                        copy_lag_segments=d.copy_lag_segments,
                        remote_log_start_offset=d.remote_log_start_offset,
                        remote_delete_state=d.remote_delete_state,
                    )
                    for d in self._data.describe_log_dirs()
                ]
            )

        return handle(context, call, lambda e: pb.DescribeLogDirsResponse())

    def AssignPartitions(
        self, request: pb.AssignPartitionsRequest, context: grpc.ServicerContext
    ) -> pb.AssignPartitionsResponse:
        def call() -> pb.AssignPartitionsResponse:
            self._require_cluster(context, AclOperation.CLUSTER_ACTION)
            assignments = [
                (topic_id_partition_from_proto(a.partition), dict(a.configs), a.tiered_epoch)
                for a in request.partitions
            ]
            errors = self._hosting.assign(assignments, request.controller_epoch)
            return pb.AssignPartitionsResponse(errors=[error_to_proto(e) for e in errors])

        return handle(
            context,
            call,
            lambda e: pb.AssignPartitionsResponse(
                errors=[error_to_proto(e)] * len(request.partitions)
            ),
        )

    def DisableRemoteTopic(
        self, request: pb.DisableRemoteTopicRequest, context: grpc.ServicerContext
    ) -> pb.DisableRemoteTopicResponse:
        def call() -> pb.DisableRemoteTopicResponse:
            self._require_cluster(context, AclOperation.CLUSTER_ACTION)
            # Every entry is read before anything is applied: a malformed one refuses them all.
            entries = [_stop_from_proto(e) for e in request.entries]
            stops = [e for e in entries if isinstance(e, PartitionStop)]
            outcomes = iter(self._hosting.disable_remote_topic(request.controller_epoch, stops))
            errors = [next(outcomes) if isinstance(e, PartitionStop) else e for e in entries]
            return pb.DisableRemoteTopicResponse(
                error=error_to_proto(None), errors=[error_to_proto(e) for e in errors]
            )

        return handle(
            context, call, lambda e: pb.DisableRemoteTopicResponse(error=error_to_proto(e))
        )

    def RemovePartitions(
        self, request: pb.RemovePartitionsRequest, context: grpc.ServicerContext
    ) -> pb.RemovePartitionsResponse:
        def call() -> pb.RemovePartitionsResponse:
            self._require_cluster(context, AclOperation.CLUSTER_ACTION)
            keys = [_partition_key(p) for p in request.partitions]
            errors = self._hosting.remove_partitions(request.controller_epoch, keys)
            return pb.RemovePartitionsResponse(errors=[error_to_proto(e) for e in errors])

        return handle(
            context,
            call,
            lambda e: pb.RemovePartitionsResponse(
                errors=[error_to_proto(e)] * len(request.partitions)
            ),
        )
