"""The controller's AdminService (the CLIs' and the brokers' admin calls). Thin: judge the
caller (``AclMethods``), convert protobuf at the edge (``controller.admin_proto``), call
``AdminOperations`` or ``ScramUsers``, map errors in ``tiered.rpc.status``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, NoReturn

import grpc

from controller.acl_operations import AclOperations
from controller.acl_servicer import CLUSTER, TOPIC, AclMethods, Requester
from controller.admin_operations import AdminOperations, DryRun, TopicView
from controller.admin_proto import (
    alter_response_to_proto,
    alter_result_to_proto,
    alteration_from_proto,
    broker_description_to_proto,
    deleted_topic_to_proto,
    increase_from_proto,
    placement_to_proto,
    scrub_report_to_proto,
    topic_description_to_proto,
    verify_report_to_proto,
)
from controller.broker_work import BrokerWork
from controller.remote_scrub import RemoteScrub
from controller.remote_verify import RemoteVerify
from controller.scram_users import ScramDeletion, ScramUpsertion, ScramUsers
from controller.topic_changes import TopicChanges
from tiered.cluster.model import DEFAULT_SCRUB_MIN_AGE_MS, TopicMetadata
from tiered.cluster.serde import tiered_state_to_proto, uuid_from_bytes
from tiered.config import TOPIC_CONFIG_DEFAULTS
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.status import error_to_proto, handle
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.security.access import AccessControl
from tiered.security.acl import CLUSTER_NAME, AclOperation

__all__ = ["AdminServicer"]


# A watch holds a server thread: at most this many at once (of the server's 64), the rest poll.
MAX_WATCHES = 16
# How often a watch describes again without a change: a delete job's progress between writes.
WATCH_REFRESH_S = 1.0
# After a change, a watch pauses this many times what its last describe cost (at most
# WATCH_MAX_PAUSE_S): a describe of a few topics costs a fraction of a millisecond, so their
# watch answers at once; one of thousands does not describe again for every ack.
WATCH_PACING = 4.0
WATCH_MAX_PAUSE_S = 0.25


def _abort_with(context: grpc.ServicerContext) -> Callable[[TieredError], NoReturn]:
    """A watch's failure ends its stream: NOT_CONTROLLER as UNAVAILABLE (the client watches
    again at the next controller), any other error as FAILED_PRECONDITION, named."""

    def abort(error: TieredError) -> NoReturn:
        status = (
            grpc.StatusCode.UNAVAILABLE
            if error.code is ErrorCode.NOT_CONTROLLER
            else grpc.StatusCode.FAILED_PRECONDITION
        )
        context.abort(status, f"{error.code.name}: {error.message}")
        raise AssertionError("unreachable: abort raises")

    return abort


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
        changes: TopicChanges,
        hosting: BrokerWork,
        remote_verify: RemoteVerify | None = None,
        remote_scrub: RemoteScrub | None = None,
    ) -> None:
        """``changes`` wakes watches; ``hosting`` says when new partitions' leaders host them
        (the wait of CreateTopics and CreatePartitions, Kafka's ``DelayedCreatePartitions``);
        ``remote_verify`` answers VerifyRemoteStorage and ``remote_scrub`` ScrubRemoteStorage
        (None: answered INVALID_REQUEST)."""
        self._admin = admin
        self._remote_verify = remote_verify
        self._remote_scrub = remote_scrub
        self._hosting = hosting
        self._access = access
        self._acls = acls
        self._scram_users = scram_users
        self._changes = changes
        self._watches = threading.BoundedSemaphore(MAX_WATCHES)

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
        if not request.validate_only:
            self._wait_hosted(results, request.timeout_ms)
        return pb.CreateTopicsResponse(results=results)

    def _wait_hosted(self, results: Sequence[pb.TopicResult], timeout_ms: int) -> None:
        """Kafka's CreateTopics/CreatePartitions answer once the leader of every new partition
        hosts it: the created topics whose leaders do not within ``timeout_ms`` are answered
        REQUEST_TIMED_OUT (they exist all the same); 0 answers at once."""
        created = {
            uuid_from_bytes(r.topic_id): r
            for r in results
            if r.error.code == ErrorCode.NONE.value and len(r.topic_id) == 16
        }
        if timeout_ms <= 0 or not created:
            return
        for topic_id in self._hosting.wait_hosted(list(created), timeout_ms / 1000):
            result = created[topic_id]
            result.error.CopyFrom(
                error_to_proto(
                    TieredError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"topic {result.name!r} was created, but not every partition's leader "
                        f"hosted it within {timeout_ms} ms",
                    )
                )
            )

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
            increases = [increase_from_proto(g) for g in request.topics]
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
            if not request.validate_only:
                self._wait_hosted(results, request.timeout_ms)
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
        return handle(
            context,
            lambda: self._described(self.requester(context), request),
            lambda e: pb.DescribeTopicsResponse(
                topics=[pb.TopicDescription(error=error_to_proto(e))]
            ),
        )

    def WatchTopics(
        self, request: pb.DescribeTopicsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.DescribeTopicsResponse]:
        """DescribeTopics now and after each change (``TopicChanges``), or every
        ``WATCH_REFRESH_S`` (a delete job's progress between its writes), sent only when it
        differs; ends as soon as the client goes away (its slot is free again). A failure
        (this controller deposed) ends the stream with its status, and the client watches
        again at the next controller."""
        if not self._watches.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{MAX_WATCHES} watches already; poll DescribeTopics instead",
            )
        gone = threading.Event()

        def client_left() -> None:
            gone.set()
            self._changes.wake()

        context.add_callback(client_left)
        try:
            requester = handle(context, lambda: self.requester(context), _no_requester)
            last: pb.DescribeTopicsResponse | None = None
            while context.is_active() and not gone.is_set():
                seen = self._changes.version
                started = time.monotonic()
                answer = handle(
                    context, lambda: self._described(requester, request), _abort_with(context)
                )
                cost = time.monotonic() - started
                if answer != last:
                    yield answer
                    last = answer
                self._changes.wait(seen, WATCH_REFRESH_S, gone)
                # Changes that come in a flood (10k acks) are described together: a watch of
                # many topics spends at most 1/(1 + WATCH_PACING) of its time describing.
                gone.wait(min(WATCH_PACING * cost, WATCH_MAX_PAUSE_S))
        finally:
            self._watches.release()

    def _described(
        self, requester: Requester, request: pb.DescribeTopicsRequest
    ) -> pb.DescribeTopicsResponse:
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
                if isinstance(v, TieredError) or requester.may(AclOperation.DESCRIBE, v.topic.name)
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
        return self._alter_configs(request, context, configs=dict(request.configs))

    def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterConfigsResponse:
        return self._alter_configs(
            request, context, set_=dict(request.set), delete=list(request.delete)
        )

    def _alter_configs(
        self,
        request: pb.AlterConfigsRequest | pb.IncrementalAlterConfigsRequest,
        context: grpc.ServicerContext,
        **changes: Any,
    ) -> pb.AlterConfigsResponse:
        """Both alters: the whole set of configs (``configs``) or what changes (``set_``,
        ``delete``)."""
        return handle(
            context,
            lambda: alter_response_to_proto(
                self._admin.alter_configs(
                    request.topic,
                    validate_only=request.validate_only,
                    authorizer=self.requester(context),
                    **changes,
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
                brokers=[
                    broker_description_to_proto(r, fenced, view.reach.get(r.broker_id))
                    for r, fenced in view.brokers
                ],
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
                    placement_to_proto(name, topic, view.unhosted)
                    for name, topic in zip(asked, view.topics, strict=True)
                ],
            )

        return handle(context, call, lambda e: pb.DescribeMetadataResponse(error=error_to_proto(e)))

    def AlterTopicConfigs(
        self, request: pb.AlterTopicConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterTopicConfigsResponse:
        def call() -> pb.AlterTopicConfigsResponse:
            alterations = [alteration_from_proto(a) for a in request.topics]
            requester = self.requester(context)
            results: Sequence[TopicMetadata | DryRun | TieredError] = (
                self._admin.dry_run_topic_configs(alterations, requester)
                if request.validate_only
                else self._admin.alter_topic_configs(alterations, False, requester)
            )
            return pb.AlterTopicConfigsResponse(
                results=[
                    alter_result_to_proto(a.topic, r)
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
            self.requester(context).require_cluster(AclOperation.ALTER, audit=True)
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
            self.requester(context).require_cluster(AclOperation.DESCRIBE)
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

    def VerifyRemoteStorage(
        self, request: pb.VerifyRemoteStorageRequest, context: grpc.ServicerContext
    ) -> pb.VerifyRemoteStorageResponse:
        """Describe on the cluster, or with a topic on that topic (as a describe of it)."""

        def call() -> pb.VerifyRemoteStorageResponse:
            topic = request.topic if request.HasField("topic") else None
            requester = self.requester(context)
            if topic is None:
                requester.require_cluster(AclOperation.DESCRIBE)
            elif requester.denial(AclOperation.DESCRIBE, CLUSTER, CLUSTER_NAME) is not None:
                denied = requester.denial(AclOperation.DESCRIBE, TOPIC, topic)
                if denied is not None:
                    raise denied
            if self._remote_verify is None:
                raise TieredError(
                    ErrorCode.INVALID_REQUEST, "this controller can not verify remote storage"
                )
            return verify_report_to_proto(self._remote_verify.verify(topic))

        return handle(
            context, call, lambda e: pb.VerifyRemoteStorageResponse(error=error_to_proto(e))
        )

    def ScrubRemoteStorage(
        self, request: pb.ScrubRemoteStorageRequest, context: grpc.ServicerContext
    ) -> pb.ScrubRemoteStorageResponse:
        """Describe on the cluster; Alter on the cluster (audited) to delete what it finds."""

        def call() -> pb.ScrubRemoteStorageResponse:
            requester = self.requester(context)
            if request.execute:
                requester.require_cluster(AclOperation.ALTER, audit=True)
            else:
                requester.require_cluster(AclOperation.DESCRIBE)
            if self._remote_scrub is None:
                raise TieredError(
                    ErrorCode.INVALID_REQUEST, "this controller can not scrub remote storage"
                )
            min_age_ms = (
                request.min_age_ms if request.HasField("min_age_ms") else DEFAULT_SCRUB_MIN_AGE_MS
            )
            return scrub_report_to_proto(self._remote_scrub.scrub(min_age_ms, request.execute))

        return handle(
            context, call, lambda e: pb.ScrubRemoteStorageResponse(error=error_to_proto(e))
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
