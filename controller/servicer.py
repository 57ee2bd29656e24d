"""The controller's gRPC servicers: AdminService (CLIs) and ControllerService (brokers). Thin:
convert protobuf at the edge, call ``AdminOperations`` or the ``BrokerRegistry``, map errors in
``tiered.rpc.status``."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import grpc

from controller.acl_operations import AclOperations
from controller.acl_servicer import CLUSTER, TOPIC, AclMethods, Requester
from controller.admin_operations import AdminOperations, TopicAlteration, TopicView
from controller.broker_registry import BrokerRegistry
from controller.leadership import Term
from controller.partition_growth import PartitionIncrease
from controller.scram_users import ScramDeletion, ScramUpsertion, ScramUsers
from controller.store import MetadataStore, MetadataStoreError
from controller.store.base import MetadataLogSource
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeleteJobState,
    TieredState,
    TopicMetadata,
)
from tiered.cluster.serde import (
    broker_endpoints_to_proto,
    broker_registration_from_proto,
    tiered_state_to_proto,
)
from tiered.config import TOPIC_CONFIG_DEFAULTS, ConfigOperation
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.status import error_to_proto, handle
from tiered.rpc.v1 import broker_pb2 as broker_pb
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.security.access import AccessControl
from tiered.security.acl import CLUSTER_NAME, AclOperation
from tiered.security.grpc_context import grpc_request_context


def topic_description_to_proto(view: TopicView) -> pb.TopicDescription:
    topic = view.topic
    partitions = []
    for p, broker in enumerate(topic.replicas):
        state = view.partition_states.get(p)
        description = pb.PartitionDescription(
            partition=p,
            leader=broker,
            leader_available=state is not None,
            remote_log_start_offset=-1,
            disable_acked=topic.tiered_state is TieredState.DISABLING
            and p not in view.owed_partitions,
        )
        if state is not None:
            description.offsets.CopyFrom(
                broker_pb.PartitionOffsets(
                    log_start_offset=state.log_start_offset,
                    local_log_start_offset=state.local_log_start_offset,
                    log_end_offset=state.log_end_offset,
                )
            )
            description.remote_log_size_bytes = state.remote_size_bytes
            description.remote_segment_count = state.remote_segment_count
            description.remote_log_start_offset = state.remote_log_start_offset
            description.remote_delete_state = state.remote_delete_state
        partitions.append(description)
    job = view.delete_job
    if job is not None:
        done = {d.partition: d for d in job.progress}
        for description in partitions:
            progress = done.get(description.partition)
            description.delete_objects_total = -1 if progress is None else progress.objects_total
            description.delete_objects_deleted = 0 if progress is None else progress.objects_deleted
            description.delete_done = progress is not None and progress.done
            if job.tiered_epoch == topic.tiered_epoch:
                description.remote_delete_state = (
                    "DELETE_PARTITION_FINISHED"
                    if description.delete_done
                    else "DELETE_PARTITION_STARTED"
                    if job.state is DeleteJobState.RUNNING
                    else description.remote_delete_state or "DELETE_PARTITION_MARKED"
                )
    return pb.TopicDescription(
        delete_job=None if job is None else delete_job_summary_to_proto(job),
        name=topic.name,
        topic_id=topic.topic_id.bytes,
        tiered_state=tiered_state_to_proto(topic.tiered_state),
        tiered_epoch=topic.tiered_epoch,
        configs=dict(topic.configs),
        partitions=partitions,
        disable_acks_owed=view.acks_owed,
        disable_acks_total=view.acks_total,
        disable_policy=view.disable_policy,
        error=error_to_proto(None),
    )


def delete_job_summary_to_proto(job: DeleteJob) -> pb.DeleteJobDescription:
    """The job as a describe shows it: totals over its partitions, not the durable record
    (``tiered.cluster.serde.delete_job_to_proto``)."""
    return pb.DeleteJobDescription(
        state=job.state.value,
        tiered_epoch=job.tiered_epoch,
        attempts=job.attempts,
        last_error=job.last_error,
        objects_total=job.objects_total,
        objects_deleted=job.objects_deleted,
        partitions_done=job.partitions_done,
        partition_count=job.partition_count,
    )


def deleted_topic_to_proto(job: DeleteJob) -> pb.DeletedTopicDescription:
    return pb.DeletedTopicDescription(
        name=job.topic, topic_id=job.topic_id.bytes, delete_job=delete_job_summary_to_proto(job)
    )


def _alter_response(topic: TopicMetadata) -> pb.AlterConfigsResponse:
    return pb.AlterConfigsResponse(
        error=error_to_proto(None),
        tiered_state=tiered_state_to_proto(topic.tiered_state),
        tiered_epoch=topic.tiered_epoch,
    )


def _topic_error(name: str) -> Callable[[TieredError], pb.TopicResult]:
    return lambda e: pb.TopicResult(name=name, error=error_to_proto(e))


class AdminServicer(AclMethods, pb_grpc.AdminServiceServicer):
    """Every method judges its caller (``AclMethods.requester``); batch methods answer a denied
    topic in its result (TOPIC_AUTHORIZATION_FAILED), single-resource ones with the status
    PERMISSION_DENIED (``tiered.rpc.status.handle``)."""

    def __init__(
        self,
        admin: AdminOperations,
        access: AccessControl,
        acls: AclOperations,
        scram_users: ScramUsers,
    ) -> None:
        self._admin = admin
        self._access = access
        self._acls = acls
        self._scram_users = scram_users

    def CreateTopics(
        self, request: pb.CreateTopicsRequest, context: grpc.ServicerContext
    ) -> pb.CreateTopicsResponse:
        requester = handle(context, lambda: self.requester(context), _no_requester)
        results = []
        for new in request.topics:

            def call(new: pb.NewTopic = new) -> pb.TopicResult:
                denied = requester.may_create(new.name)
                if denied is not None:
                    return pb.TopicResult(name=new.name, error=error_to_proto(denied))
                topic = self._admin.create_topic(
                    new.name, new.partitions, dict(new.configs), request.validate_only
                )
                return pb.TopicResult(
                    name=new.name, error=error_to_proto(None), topic_id=topic.topic_id.bytes
                )

            results.append(handle(context, call, _topic_error(new.name)))
        return pb.CreateTopicsResponse(results=results)

    def DeleteTopics(
        self, request: pb.DeleteTopicsRequest, context: grpc.ServicerContext
    ) -> pb.DeleteTopicsResponse:
        requester = handle(context, lambda: self.requester(context), _no_requester)
        results = []
        for name in request.names:

            def call(name: str = name) -> pb.TopicResult:
                denied = requester.denial(AclOperation.DELETE, TOPIC, name, audit=True)
                if denied is not None:
                    return pb.TopicResult(name=name, error=error_to_proto(denied))
                self._admin.delete_topic(name)
                return pb.TopicResult(name=name, error=error_to_proto(None))

            results.append(handle(context, call, _topic_error(name)))
        return pb.DeleteTopicsResponse(results=results)

    def CreatePartitions(
        self, request: pb.CreatePartitionsRequest, context: grpc.ServicerContext
    ) -> pb.CreatePartitionsResponse:
        """Alter on each topic (Kafka's), judged before the topic's existence is told; the
        allowed increases go to the controller in one operation (one write)."""

        def call() -> pb.CreatePartitionsResponse:
            requester = self.requester(context)
            increases = [_increase_from_proto(g) for g in request.topics]
            names = [i.topic for i in increases]
            denied = [
                None
                if names.count(i.topic) > 1
                else requester.denial(AclOperation.ALTER, TOPIC, i.topic, audit=True)
                for i in increases
            ]
            allowed = [i for i, d in zip(increases, denied, strict=True) if d is None]
            grown = iter(self._admin.create_partitions(allowed, request.validate_only))
            results = []
            for increase, error in zip(increases, denied, strict=True):
                outcome = error or next(grown)
                results.append(
                    pb.TopicResult(name=increase.topic, error=error_to_proto(outcome))
                    if isinstance(outcome, TieredError)
                    else pb.TopicResult(
                        name=increase.topic,
                        error=error_to_proto(None),
                        topic_id=outcome.topic_id.bytes,
                    )
                )
            return pb.CreatePartitionsResponse(results=results)

        return handle(
            context,
            call,
            lambda e: pb.CreatePartitionsResponse(
                results=[pb.TopicResult(error=error_to_proto(e))]
            ),
        )

    def DescribeTopics(
        self, request: pb.DescribeTopicsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeTopicsResponse:
        def call() -> pb.DescribeTopicsResponse:
            requester = self.requester(context)
            names = list(request.names)
            denied = {n: requester.denial(AclOperation.DESCRIBE, TOPIC, n) for n in names}
            allowed = [n for n in names if denied[n] is None]
            views: list[TopicView | TieredError] = []
            if allowed or not names:
                views = self._admin.describe_topics(allowed, request.include_partition_state)
            if not names:  # a listing leaves out what the requester may not see
                views = [
                    v
                    for v in views
                    if isinstance(v, TieredError)
                    or requester.may(AclOperation.DESCRIBE, v.topic.name)
                ]
            found = iter(views)
            topics = []
            listed: list[str | None] = list(names) or [None] * len(views)
            for name in listed:
                error = denied.get(name) if name is not None else None
                view = error or next(found)
                if isinstance(view, TieredError):
                    topics.append(pb.TopicDescription(name=name or "", error=error_to_proto(view)))
                else:
                    topics.append(topic_description_to_proto(view))
            deleted = (
                [
                    j
                    for j in self._admin.describe_deleted_topics(allowed)
                    if requester.may(AclOperation.DESCRIBE, j.topic)
                ]
                if allowed or not names
                else []
            )
            return pb.DescribeTopicsResponse(
                topics=topics, deleted_topics=[deleted_topic_to_proto(j) for j in deleted]
            )

        return handle(
            context,
            call,
            lambda e: pb.DescribeTopicsResponse(
                topics=[pb.TopicDescription(error=error_to_proto(e))]
            ),
        )

    def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeConfigsResponse:
        def call() -> pb.DescribeConfigsResponse:
            self._require(context, AclOperation.DESCRIBE_CONFIGS, request.topic)
            topic = self._admin.describe_configs(request.topic)
            entries = [
                pb.ConfigEntry(
                    name=key,
                    value=topic.configs.get(key, default),
                    is_default=key not in topic.configs,
                )
                for key, default in sorted(TOPIC_CONFIG_DEFAULTS.items())
            ]
            return pb.DescribeConfigsResponse(
                error=error_to_proto(None),
                entries=entries,
                tiered_state=tiered_state_to_proto(topic.tiered_state),
                tiered_epoch=topic.tiered_epoch,
            )

        return handle(context, call, lambda e: pb.DescribeConfigsResponse(error=error_to_proto(e)))

    def AlterConfigs(
        self, request: pb.AlterConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterConfigsResponse:
        return handle(
            context,
            lambda: _alter_response(
                self._admin.alter_configs(
                    request.topic,
                    configs=dict(request.configs),
                    validate_only=request.validate_only,
                    authorizer=self.requester(context),
                )
            ),
            lambda e: pb.AlterConfigsResponse(error=error_to_proto(e)),
        )

    def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterConfigsResponse:
        return handle(
            context,
            lambda: _alter_response(
                self._admin.alter_configs(
                    request.topic,
                    set_=dict(request.set),
                    delete=list(request.delete),
                    validate_only=request.validate_only,
                    authorizer=self.requester(context),
                )
            ),
            lambda e: pb.AlterConfigsResponse(error=error_to_proto(e)),
        )

    def DescribeCluster(
        self, request: pb.DescribeClusterRequest, context: grpc.ServicerContext
    ) -> pb.DescribeClusterResponse:
        def call() -> pb.DescribeClusterResponse:
            view = self._admin.describe_cluster()
            return pb.DescribeClusterResponse(
                controller_id=view.controller_id,
                controller_epoch=view.controller_epoch,
                controller_endpoint=view.controller_endpoint,
                metadata_mode=view.metadata_mode,
                brokers=[broker_description_to_proto(r, fenced) for r, fenced in view.brokers],
                error=error_to_proto(None),
            )

        def on_error(e: TieredError) -> pb.DescribeClusterResponse:
            response = pb.DescribeClusterResponse(error=error_to_proto(e))
            active = self._admin.active_controller() if e.code is ErrorCode.NOT_CONTROLLER else None
            if active is not None:
                response.controller_id, response.controller_endpoint = active
            return response

        return handle(context, call, on_error)

    def DescribeMetadata(
        self, request: pb.DescribeMetadataRequest, context: grpc.ServicerContext
    ) -> pb.DescribeMetadataResponse:
        def call() -> pb.DescribeMetadataResponse:
            requester = self.requester(context)
            # A broker (ClusterAction) sees everything and filters for its own clients.
            everything = (
                requester.denial(AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME) is None
            )
            names = None if request.all_topics else list(request.topics)
            view = self._admin.describe_metadata(names)
            asked: list[str | None] = (
                list(names) if names is not None else [None] * len(view.topics)
            )
            if not everything:
                asked, topics = _visible(requester, asked, view.topics)
                view = replace(view, topics=topics)
            return pb.DescribeMetadataResponse(
                error=error_to_proto(None),
                cluster_id=view.cluster_id,
                brokers=[broker_description_to_proto(r, False) for r in view.brokers],
                topics=[
                    _placement_to_proto(name, topic)
                    for name, topic in zip(asked, view.topics, strict=True)
                ],
            )

        return handle(context, call, lambda e: pb.DescribeMetadataResponse(error=error_to_proto(e)))

    def AlterTopicConfigs(
        self, request: pb.AlterTopicConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterTopicConfigsResponse:
        def call() -> pb.AlterTopicConfigsResponse:
            alterations = [_alteration_from_proto(a) for a in request.topics]
            results = self._admin.alter_topic_configs(
                alterations, request.validate_only, self.requester(context)
            )
            return pb.AlterTopicConfigsResponse(
                results=[
                    _alter_result_to_proto(a.topic, r)
                    for a, r in zip(alterations, results, strict=True)
                ],
                error=error_to_proto(None),
            )

        return handle(
            context, call, lambda e: pb.AlterTopicConfigsResponse(error=error_to_proto(e))
        )

    def AlterUserScramCredentials(
        self, request: pb.AlterUserScramCredentialsRequest, context: grpc.ServicerContext
    ) -> pb.AlterUserScramCredentialsResponse:
        def call() -> pb.AlterUserScramCredentialsResponse:
            results = self._scram_users.alter(
                [ScramDeletion(d.name, d.mechanism) for d in request.deletions],
                [
                    ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                    for u in request.upsertions
                ],
            )
            return pb.AlterUserScramCredentialsResponse(
                results=[pb.UserResult(user=u, error=error_to_proto(e)) for u, e in results],
                error=error_to_proto(None),
            )

        return handle(
            context, call, lambda e: pb.AlterUserScramCredentialsResponse(error=error_to_proto(e))
        )

    def DescribeUserScramCredentials(
        self, request: pb.DescribeUserScramCredentialsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeUserScramCredentialsResponse:
        def call() -> pb.DescribeUserScramCredentialsResponse:
            results = []
            for user, found in self._scram_users.describe(list(request.users)):
                if isinstance(found, TieredError):
                    results.append(pb.UserScramCredentials(user=user, error=error_to_proto(found)))
                    continue
                results.append(
                    pb.UserScramCredentials(
                        user=user,
                        error=error_to_proto(None),
                        credentials=[
                            pb.ScramCredentialInfo(mechanism=m.type_id, iterations=i)
                            for m, i in found
                        ],
                    )
                )
            return pb.DescribeUserScramCredentialsResponse(
                results=results, error=error_to_proto(None)
            )

        return handle(
            context,
            call,
            lambda e: pb.DescribeUserScramCredentialsResponse(error=error_to_proto(e)),
        )

    def _require(self, context: grpc.ServicerContext, operation: AclOperation, topic: str) -> None:
        error = self.requester(context).denial(operation, TOPIC, topic)
        if error is not None:
            raise error


def _no_requester(error: TieredError) -> Requester:
    raise error  # handle() answered it: PERMISSION_DENIED, or the NOT_CONTROLLER below


def _visible(
    requester: Requester,
    asked: list[str | None],
    topics: Sequence[TopicMetadata | TieredError],
) -> tuple[list[str | None], list[TopicMetadata | TieredError]]:
    """What a requester without ClusterAction may see of DescribeMetadata's topics: a listing
    leaves out the topics it may not Describe, a named one is TOPIC_AUTHORIZATION_FAILED."""
    kept_names: list[str | None] = []
    kept: list[TopicMetadata | TieredError] = []
    for name, topic in zip(asked, topics, strict=True):
        if name is None:
            if isinstance(topic, TopicMetadata) and requester.may(
                AclOperation.DESCRIBE, topic.name
            ):
                kept_names.append(name)
                kept.append(topic)
            continue
        kept_names.append(name)
        kept.append(requester.denial(AclOperation.DESCRIBE, TOPIC, name) or topic)
    return kept_names, kept


def broker_description_to_proto(
    registration: BrokerRegistration, fenced: bool
) -> pb.BrokerDescription:
    return pb.BrokerDescription(
        broker_id=registration.broker_id,
        host=registration.host,
        port=registration.port,
        fenced=fenced,
        kafka_endpoints=broker_endpoints_to_proto(registration.kafka_endpoints),
    )


def _placement_to_proto(name: str | None, topic: TopicMetadata | TieredError) -> pb.TopicPlacement:
    if isinstance(topic, TieredError):
        return pb.TopicPlacement(name=name or "", error=error_to_proto(topic))
    return pb.TopicPlacement(
        name=topic.name,
        topic_id=topic.topic_id.bytes,
        replicas=topic.replicas,
        error=error_to_proto(None),
    )


def _increase_from_proto(growth: pb.PartitionGrowth) -> PartitionIncrease:
    return PartitionIncrease(
        growth.topic,
        growth.count,
        tuple(tuple(a.broker_ids) for a in growth.assignments) if growth.has_assignments else None,
    )


def _alteration_from_proto(alteration: pb.TopicConfigAlteration) -> TopicAlteration:
    """ValueError (INVALID_ARGUMENT) for an operation this controller does not know."""
    return TopicAlteration(
        alteration.topic,
        tuple((c.name, ConfigOperation(c.operation), c.value) for c in alteration.configs),
        alteration.replace,
    )


def _alter_result_to_proto(
    name: str, result: TopicMetadata | TieredError
) -> pb.AlterTopicConfigsResult:
    if isinstance(result, TieredError):
        return pb.AlterTopicConfigsResult(topic=name, error=error_to_proto(result))
    return pb.AlterTopicConfigsResult(
        topic=name,
        error=error_to_proto(None),
        tiered_state=tiered_state_to_proto(result.tiered_state),
        tiered_epoch=result.tiered_epoch,
    )


class ControllerServicer(pb_grpc.ControllerServiceServicer):
    """Brokers' calls: each needs ClusterAction on the cluster, of the caller itself."""

    def __init__(
        self,
        brokers: BrokerRegistry,
        term: Term,
        store: MetadataStore,
        stopping: threading.Event,
        access: AccessControl,
    ) -> None:
        self._brokers = brokers
        self._term = term
        self._store = store
        self._stopping = stopping
        self._access = access

    def _require_cluster_action(self, context: grpc.ServicerContext) -> None:
        self._access.require(
            grpc_request_context(context), AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME
        )

    def RegisterBroker(
        self, request: pb.RegisterBrokerRequest, context: grpc.ServicerContext
    ) -> pb.RegisterBrokerResponse:
        def call() -> pb.RegisterBrokerResponse:
            self._require_cluster_action(context)
            epoch = self._brokers.register(broker_registration_from_proto(request.registration))
            return pb.RegisterBrokerResponse(error=error_to_proto(None), controller_epoch=epoch)

        return handle(context, call, lambda e: pb.RegisterBrokerResponse(error=error_to_proto(e)))

    def BrokerHeartbeat(
        self, request: pb.BrokerHeartbeatRequest, context: grpc.ServicerContext
    ) -> pb.BrokerHeartbeatResponse:
        def call() -> pb.BrokerHeartbeatResponse:
            self._require_cluster_action(context)
            epoch = self._brokers.heartbeat(
                request.broker_id, uuid.UUID(bytes=request.incarnation_id)
            )
            return pb.BrokerHeartbeatResponse(error=error_to_proto(None), controller_epoch=epoch)

        return handle(context, call, lambda e: pb.BrokerHeartbeatResponse(error=error_to_proto(e)))

    def FetchMetadata(
        self, request: pb.FetchMetadataRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.FetchMetadataResponse]:
        """KRaft mode: the metadata log from ``from_offset`` on, then new batches as they are
        written, until the broker goes away or this controller stops being active."""
        store = self._store
        denied: pb.FetchMetadataResponse | None = handle(
            context, lambda: self._require_cluster_action(context), _fetch_refused
        )
        if denied is not None:
            yield denied
            return
        if not isinstance(store, MetadataLogSource):
            yield pb.FetchMetadataResponse(
                error=error_to_proto(
                    TieredError(
                        ErrorCode.INVALID_REQUEST,
                        f"FetchMetadata needs metadata.store=kraft, not {store.mode}",
                    )
                )
            )
            return
        offset = request.from_offset
        while context.is_active() and not self._stopping.is_set():
            if self._term.active_epoch is None:
                yield pb.FetchMetadataResponse(
                    error=error_to_proto(
                        TieredError(ErrorCode.NOT_CONTROLLER, "this controller is not active")
                    )
                )
                return
            try:
                batches, is_snapshot = store.read_batches(offset, 1.0)
            except MetadataStoreError as e:  # resigned while the broker waited
                yield pb.FetchMetadataResponse(
                    error=error_to_proto(TieredError(ErrorCode.NOT_CONTROLLER, str(e)))
                )
                return
            for batch in batches:
                # A snapshot is the image as of its base_offset (the last record it includes).
                offset = batch.base_offset + (1 if is_snapshot else len(batch.records))
                yield pb.FetchMetadataResponse(
                    batch=batch,
                    is_snapshot=is_snapshot,
                    next_offset=offset,
                    error=error_to_proto(None),
                )


def _fetch_refused(error: TieredError) -> pb.FetchMetadataResponse:
    return pb.FetchMetadataResponse(error=error_to_proto(error))
