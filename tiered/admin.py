"""AdminClient: the Python client of the controller's AdminService (what the CLIs use).

Results are plain frozen dataclasses (``tiered.admin_serde``, re-exported here); protobuf stays
inside these two modules. Domain errors in a response raise ``TieredError`` with the response's
code; a failed RPC raises what ``tiered.rpc.status.error_from_rpc`` makes of its status.

``bootstrap`` is a comma list of ``host:port`` (controllers or brokers). The client finds the active
controller by asking each address in turn for DescribeCluster; a standby answers NOT_CONTROLLER and
may name the active controller's endpoint, which is tried next. The first address that answers
without an error is cached. When the cached address later answers NOT_CONTROLLER or is UNAVAILABLE,
or when only standbys answer (an election is in progress: the old controller's session has not
expired yet), the client rediscovers and retries the call until its timeout, like Kafka's admin
client with a retriable error (a ``ControllerRetry`` decides how often and how long; inject another
one to change that). When no address answers at all it fails at once: a wrong bootstrap address
should not cost the operator the whole timeout.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import Message

from tiered.admin_serde import (
    AlterResult,
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    DeletedTopicDescription,
    DeleteJobDescription,
    PartitionDescription,
    TopicDescription,
    TopicListing,
    alter_result_from_proto,
    alter_topic_result_from_proto,
    cluster_from_proto,
    deleted_topic_from_proto,
    not_controller_error,
    raise_if_error,
    scrub_from_proto,
    topic_from_proto,
    topic_id_from_bytes,
    verification_from_proto,
)
from tiered.cluster.model import (
    DEFAULT_SCRUB_MIN_AGE_MS,
    RemoteStorageScrub,
    RemoteStorageVerification,
)
from tiered.config_def import INT32_MAX
from tiered.errors import ErrorCode, TieredError
from tiered.retry import RetryPolicy
from tiered.rpc.channels import ChannelCache, ChannelCacheClosedError
from tiered.rpc.status import error_from_proto, error_from_rpc
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.security.acl import AclBinding, AclBindingFilter
from tiered.security.acl_serde import binding_from_proto, binding_to_proto, filter_to_proto
from tiered.security.scram_admin import (
    UserScramCredentialDeletion,
    UserScramCredentials,
    UserScramCredentialUpsertion,
    alteration_to_proto,
    described_from_proto,
)

__all__ = [
    "AdminClient",
    "AlterResult",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "ControllerRetry",
    "DeleteJobDescription",
    "DeletedTopicDescription",
    "PartitionDescription",
    "TopicDescription",
    "TopicListing",
    "WatchRefusedError",
    "parse_bootstrap",
]

R = TypeVar("R")

DEFAULT_DISCOVERY_TIMEOUT_S = 3.0

# How a call is retried after the controller moved: RetryPolicy's defaults are the AdminClient's
# (50 ms doubling to 1 s, until the call's timeout); the name is the one README gives.
ControllerRetry = RetryPolicy


# Between watches when the controller went away (the next one is being elected).
WATCH_RETRY_S = 0.2


class WatchRefusedError(Exception):
    """The controller will not watch (too many watchers, or it has no WatchTopics): poll."""


class ControllerMovedError(Exception):
    """Internal: the controller we talked to is gone or no longer active. ``error`` is what the
    caller sees when the retry policy gives up."""

    def __init__(self, error: TieredError) -> None:
        super().__init__(str(error))
        self.error = error


def _give_up(moved: ControllerMovedError, _tries: int) -> TieredError:
    return moved.error


def parse_bootstrap(bootstrap: str) -> list[str]:
    """``"h1:p1, h2:p2"`` → ``["h1:p1", "h2:p2"]``; INVALID_REQUEST for an empty or malformed
    list."""
    addresses: list[str] = []
    for raw in bootstrap.split(","):
        address = raw.strip()
        if not address:
            continue
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"bootstrap address {address!r} is not host:port",
            )
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise TieredError(ErrorCode.INVALID_REQUEST, "no bootstrap address given")
    return addresses


def _check_partition_count(partitions: int) -> None:
    """Refuses a count that ``NewTopic.partitions`` (an int32) cannot carry, where protobuf would
    raise a bare ValueError; the controller holds the count to its own, lower limit."""
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 1 <= partitions <= INT32_MAX
    ):
        raise TieredError(
            ErrorCode.INVALID_PARTITIONS,
            f"partition count {partitions!r} is not valid; valid values: an integer from 1 to "
            f"{INT32_MAX}",
        )


# --------------------------------------------------------------------------------- client


class AdminClient:
    """A client of the active controller's AdminService. Thread-safe; ``close()`` when done (or
    use it as a context manager)."""

    def __init__(
        self,
        bootstrap: str,
        timeout_s: float = 30.0,
        *,
        retry: RetryPolicy | None = None,
        discovery_timeout_s: float = DEFAULT_DISCOVERY_TIMEOUT_S,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        """``credentials``: TLS channel credentials (``cli.security.client_config``); None
        is plaintext."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout_s = timeout_s
        self._retry = retry if retry is not None else ControllerRetry(deadline_s=timeout_s)
        self._discovery_timeout_s = min(discovery_timeout_s, timeout_s)
        self._lock = threading.Lock()
        self._stubs = ChannelCache(pb_grpc.AdminServiceStub, credentials=credentials)
        self._controller: str | None = None

    # -- lifecycle

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._stubs.close()
        with self._lock:
            self._controller = None

    @property
    def controller_address(self) -> str | None:
        """The address the client currently sends requests to (None before discovery)."""
        return self._controller

    # -- API

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
        wait_hosted: bool = False,
    ) -> uuid.UUID:
        """Creates the topic; with ``wait_hosted``, answers once every partition's leader hosts
        it (a producer started next finds it led), REQUEST_TIMED_OUT if that takes longer than
        half the call's timeout (the topic is created all the same)."""
        _check_partition_count(partitions)
        request = pb.CreateTopicsRequest(
            topics=[pb.NewTopic(name=name, partitions=partitions, configs=dict(configs or {}))],
            validate_only=validate_only,
            timeout_ms=self._hosting_timeout_ms() if wait_hosted else 0,
        )
        response = self._call("CreateTopics", request, pb.CreateTopicsResponse)
        result = self._result_for(name, response.results)
        raise_if_error(result.error)
        if validate_only and not result.topic_id:
            return uuid.UUID(int=0)
        return topic_id_from_bytes(result.topic_id)

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        wait_hosted: bool = False,
    ) -> None:
        """Grows the topic to ``count`` partitions (Kafka's CreatePartitions): ``assignments``
        gives the brokers of each new partition, else the controller places them. A count that
        is not an increase is INVALID_PARTITIONS. ``wait_hosted``: as ``create_topic``'s."""
        _check_partition_count(count)
        growth = pb.PartitionGrowth(
            topic=name, count=count, has_assignments=assignments is not None
        )
        for brokers in assignments or ():
            growth.assignments.add(broker_ids=list(brokers))
        request = pb.CreatePartitionsRequest(
            topics=[growth],
            validate_only=validate_only,
            timeout_ms=self._hosting_timeout_ms() if wait_hosted else 0,
        )
        response = self._call("CreatePartitions", request, pb.CreatePartitionsResponse)
        raise_if_error(self._result_for(name, response.results).error)

    def delete_topic(self, name: str) -> None:
        response = self._call(
            "DeleteTopics", pb.DeleteTopicsRequest(names=[name]), pb.DeleteTopicsResponse
        )
        raise_if_error(self._result_for(name, response.results).error)

    def watch_topics(
        self, names: Sequence[str], timeout_s: float
    ) -> Iterator[list[TopicDescription]]:
        """The named topics (``describe_topics`` without partition state) now and each time
        they change, until the caller stops iterating. A new active controller is found and
        watched in turn; REQUEST_TIMED_OUT after ``timeout_s``; ``WatchRefusedError`` when the
        controller cannot watch (too many watchers, or a controller without the call): the
        caller then polls ``describe_topics``."""
        request = pb.DescribeTopicsRequest(names=list(names))
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TieredError(ErrorCode.REQUEST_TIMED_OUT, f"watch ended after {timeout_s:g}s")
            address = self._controller or self._retry(self._discover, retry_on=ControllerMovedError)
            try:
                for response in self._stub(address).WatchTopics(request, timeout=remaining):
                    yield self._listing_from_proto(response, list(names), deleted=False).topics
            except grpc.RpcError as e:
                code = e.code()
                if code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNIMPLEMENTED):
                    raise WatchRefusedError(f"WatchTopics to {address}: {e.details()}") from e
                if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise TieredError(
                        ErrorCode.REQUEST_TIMED_OUT, f"watch ended after {timeout_s:g}s"
                    ) from e
                if code is not grpc.StatusCode.UNAVAILABLE:
                    raise error_from_rpc(e, f"WatchTopics to {address}", remaining) from e
                self._forget(address)  # deposed or gone: the next controller is watched
                time.sleep(min(WATCH_RETRY_S, max(0.0, deadline - time.monotonic())))

    def describe_topics(
        self, names: Iterable[str] | None = None, include_partition_state: bool = True
    ) -> list[TopicDescription]:
        """The named topics in the order asked, or every topic (by name) when ``names`` is None.
        A named topic that does not exist raises UNKNOWN_TOPIC_OR_PARTITION."""
        return self.describe_topic_listing(names, include_partition_state, deleted=False).topics

    def describe_topic_listing(
        self,
        names: Iterable[str] | None = None,
        include_partition_state: bool = True,
        deleted: bool = True,
    ) -> TopicListing:
        """As ``describe_topics``, with (``deleted``) the deleted topics among ``names`` (or all)
        whose remote data is still being deleted: a name is then known if a live topic or such a
        deleted one has it (kafka-topics.sh describes a topic marked for deletion too)."""
        wanted = list(names) if names is not None else []
        request = pb.DescribeTopicsRequest(
            names=wanted, include_partition_state=include_partition_state
        )
        response = self._call("DescribeTopics", request, pb.DescribeTopicsResponse)
        return self._listing_from_proto(response, wanted, deleted)

    @staticmethod
    def _listing_from_proto(
        response: pb.DescribeTopicsResponse, wanted: list[str], deleted: bool
    ) -> TopicListing:
        gone = sorted(
            (deleted_topic_from_proto(m) for m in response.deleted_topics if deleted),
            key=lambda d: (d.name, str(d.topic_id)),
        )
        gone_names = {d.name for d in gone}
        topics: list[TopicDescription] = []
        for message in response.topics:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if message.error.code == code and message.name in gone_names:
                continue
            raise_if_error(message.error)
            topics.append(topic_from_proto(message))
        if not wanted:
            return TopicListing(sorted(topics, key=lambda t: t.name), gone)
        by_name = {t.name: t for t in topics}
        missing = [n for n in wanted if n not in by_name and n not in gone_names]
        if missing:
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {missing[0]!r} does not exist"
            )
        return TopicListing([by_name[n] for n in dict.fromkeys(wanted) if n in by_name], gone)

    def describe_topic(self, name: str, include_partition_state: bool = True) -> TopicDescription:
        return self.describe_topics([name], include_partition_state)[0]

    def describe_configs(self, topic: str) -> list[ConfigEntry]:
        response = self._call(
            "DescribeConfigs", pb.DescribeConfigsRequest(topic=topic), pb.DescribeConfigsResponse
        )
        raise_if_error(response.error)
        return [ConfigEntry(e.name, e.value, e.is_default) for e in response.entries]

    def alter_configs(
        self, topic: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> AlterResult:
        """Replace the topic's whole config set."""
        request = pb.AlterConfigsRequest(
            topic=topic, configs=dict(configs), validate_only=validate_only
        )
        return alter_result_from_proto(self._call("AlterConfigs", request, pb.AlterConfigsResponse))

    def incremental_alter_topics(
        self,
        names: Sequence[str],
        set: Mapping[str, str] | None = None,  # as incremental_alter_configs
        delete: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> list[AlterResult | TieredError]:
        """The same change to every topic in one request (one durable write for all that are
        accepted); each topic's result or error, in order. ``validate_only``: a dry run, which
        changes nothing; a delete-policy disable's result then says what it would delete
        (``AlterResult.would_delete``)."""
        operations = [
            pb.ConfigAlteration(name=key, operation=pb.CONFIG_OPERATION_DELETE)
            for key in dict.fromkeys(delete)
            if key not in (set or {})
        ] + [
            pb.ConfigAlteration(name=key, operation=pb.CONFIG_OPERATION_SET, value=value)
            for key, value in (set or {}).items()
        ]
        request = pb.AlterTopicConfigsRequest(
            topics=[pb.TopicConfigAlteration(topic=n, configs=operations) for n in names],
            validate_only=validate_only,
        )
        response = self._call("AlterTopicConfigs", request, pb.AlterTopicConfigsResponse)
        raise_if_error(response.error)
        if len(response.results) != len(names):
            raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, "AlterTopicConfigs: bad response")
        return [alter_topic_result_from_proto(r) for r in response.results]

    def incremental_alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,  # the proto's name
        delete: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> AlterResult:
        request = pb.IncrementalAlterConfigsRequest(
            topic=topic, set=dict(set or {}), delete=list(delete), validate_only=validate_only
        )
        return alter_result_from_proto(
            self._call("IncrementalAlterConfigs", request, pb.AlterConfigsResponse)
        )

    def describe_cluster(self) -> ClusterDescription:
        return cluster_from_proto(
            self._call("DescribeCluster", pb.DescribeClusterRequest(), pb.DescribeClusterResponse)
        )

    def verify_remote_storage(self, topic: str | None = None) -> RemoteStorageVerification:
        """Every segment the RLMM lists as COPY_SEGMENT_FINISHED (of ``topic``, or of every
        topic) checked by the active controller against remote storage. Raises
        UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist, INVALID_REQUEST when the
        controller can not verify (no remote storage settings, a plugin without the
        capability)."""
        request = pb.VerifyRemoteStorageRequest()
        if topic is not None:
            request.topic = topic
        return verification_from_proto(
            self._call("VerifyRemoteStorage", request, pb.VerifyRemoteStorageResponse)
        )

    def scrub_remote_storage(
        self, min_age_ms: int = DEFAULT_SCRUB_MIN_AGE_MS, execute: bool = False
    ) -> RemoteStorageScrub:
        """The objects under the remote storage root that nothing claims and that are at least
        ``min_age_ms`` old, found by the active controller (and deleted there with
        ``execute``). Raises INVALID_REQUEST for a negative age or when the controller can not
        scrub (no remote storage settings, a plugin without the capability),
        CLUSTER_AUTHORIZATION_FAILED without Describe (Alter with ``execute``) on the
        cluster."""
        request = pb.ScrubRemoteStorageRequest(min_age_ms=min_age_ms, execute=execute)
        return scrub_from_proto(
            self._call("ScrubRemoteStorage", request, pb.ScrubRemoteStorageResponse)
        )

    def alter_user_scram_credentials(
        self,
        upsertions: Sequence[UserScramCredentialUpsertion] = (),
        deletions: Sequence[UserScramCredentialDeletion] = (),
    ) -> list[tuple[str, TieredError | None]]:
        """Each user named and its outcome. Passwords are salted here; a bad upsertion raises
        UNACCEPTABLE_CREDENTIAL before anything is sent."""
        response = self._call(
            "AlterUserScramCredentials",
            alteration_to_proto(upsertions, deletions),
            pb.AlterUserScramCredentialsResponse,
        )
        raise_if_error(response.error)
        return [(r.user, error_from_proto(r.error)) for r in response.results]

    def describe_user_scram_credentials(
        self, users: Sequence[str] = ()
    ) -> list[UserScramCredentials | TieredError]:
        """The named users (in order), or every user with a credential (by name)."""
        response = self._call(
            "DescribeUserScramCredentials",
            pb.DescribeUserScramCredentialsRequest(users=list(users)),
            pb.DescribeUserScramCredentialsResponse,
        )
        raise_if_error(response.error)
        return described_from_proto(response)

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Creates the ACLs (those that exist already stay as they are); raises the first
        error."""
        response = self._call(
            "CreateAcls",
            pb.CreateAclsRequest(creations=[binding_to_proto(b) for b in bindings]),
            pb.CreateAclsResponse,
        )
        raise_if_error(response.error)
        for result in response.results:
            raise_if_error(result.error)

    def describe_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        response = self._call(
            "DescribeAcls",
            pb.DescribeAclsRequest(filter=filter_to_proto(binding_filter)),
            pb.DescribeAclsResponse,
        )
        raise_if_error(response.error)
        return [binding_from_proto(b) for b in response.acls]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        """Deletes every ACL the filters match; returns them."""
        response = self._call(
            "DeleteAcls",
            pb.DeleteAclsRequest(filters=[filter_to_proto(f) for f in filters]),
            pb.DeleteAclsResponse,
        )
        raise_if_error(response.error)
        deleted = []
        for result in response.results:
            raise_if_error(result.error)
            deleted += [binding_from_proto(b) for b in result.deleted]
        return deleted

    # -- plumbing

    @staticmethod
    def _result_for(name: str, results: Sequence[pb.TopicResult]) -> pb.TopicResult:
        for result in results:
            if result.name == name:
                return result
        if len(results) == 1:
            return results[0]
        raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no result for topic {name!r}")

    def _stub(self, address: str) -> pb_grpc.AdminServiceStub:
        try:
            return self._stubs.get(address)
        except ChannelCacheClosedError:
            raise TieredError(ErrorCode.INVALID_REQUEST, "the AdminClient is closed") from None

    def _hosting_timeout_ms(self) -> int:
        """How long a create waits for the new partitions' leaders to host them: half the call's
        deadline, leaving the rest for the call itself."""
        return int(self.timeout_s * 1000 / 2)

    def _call(self, method: str, request: Message, response_type: type[R]) -> R:
        def attempt() -> R:
            address = self._controller or self._discover()
            response = self._invoke(address, method, request, self.timeout_s)
            error = not_controller_error(response)
            if error is not None:
                self._forget(address)
                raise ControllerMovedError(
                    TieredError(
                        ErrorCode.NOT_CONTROLLER,
                        error.message or f"{address} is no longer the active controller",
                    )
                )
            return cast(R, response)

        return self._retry(attempt, retry_on=ControllerMovedError, give_up=_give_up)

    def _forget(self, address: str) -> None:
        with self._lock:
            if self._controller == address:
                self._controller = None

    def _invoke(self, address: str, method: str, request: Message, timeout_s: float) -> Any:
        """One RPC; domain errors stay in the response, gRPC failures become TieredErrors
        named ``{method} to {address}: ...`` (UNAVAILABLE: ControllerMovedError, for the retry
        policy). An invalid request is the operator's own: told in the servicer's words alone."""
        try:
            return getattr(self._stub(address), method)(request, timeout=timeout_s)
        except grpc.RpcError as e:
            failure = error_from_rpc(
                e, f"{method} to {address}", timeout_s, name_call_if_invalid=False
            )
        if failure.code is ErrorCode.BROKER_NOT_AVAILABLE:
            self._forget(address)
            raise ControllerMovedError(failure)
        if failure.code is ErrorCode.REQUEST_TIMED_OUT:
            # Not retried (a write may have been applied), but the next call rediscovers: a
            # controller that stopped answering (paused, partitioned) is likely deposed.
            self._forget(address)
        raise failure

    def _discover(self) -> str:
        """Find the active controller: DescribeCluster on each bootstrap address (and each
        controller endpoint a standby names) until one answers without an error."""
        queue = list(self.bootstrap)
        failures: dict[str, str] = {}
        standbys = 0
        while queue:
            address = queue.pop(0)
            if address in failures:
                continue
            try:
                response = self._invoke(
                    address,
                    "DescribeCluster",
                    pb.DescribeClusterRequest(),
                    self._discovery_timeout_s,
                )
            except (ControllerMovedError, TieredError) as e:
                failed = e.error if isinstance(e, ControllerMovedError) else e
                told = failed.message.removeprefix(f"DescribeCluster to {address}: ")
                # "unavailable: ..." says it all; the code would only repeat it.
                unavailable = failed.code is ErrorCode.BROKER_NOT_AVAILABLE
                failures[address] = told if unavailable else f"{failed.code.name}: {told}"
                continue
            error = error_from_proto(response.error)
            if error is None:
                with self._lock:
                    self._controller = address
                return address
            failures[address] = f"{error.code.name}: {error.message}"
            if error.code is ErrorCode.NOT_CONTROLLER:
                standbys += 1
                named = response.controller_endpoint.strip()
                if named and named not in failures and named not in queue:
                    queue.insert(0, named)
        reasons = "; ".join(f"{a}: {why}" for a, why in failures.items())
        if standbys == len(failures):
            raise ControllerMovedError(
                TieredError(
                    ErrorCode.NOT_CONTROLLER,
                    f"no active controller; only standbys answered ({reasons})",
                )
            )
        if standbys:
            # A standby answered and the controller it names is gone: a failover in progress.
            raise ControllerMovedError(
                TieredError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"no active controller reachable ({reasons})"
                )
            )
        raise TieredError(
            ErrorCode.BROKER_NOT_AVAILABLE, f"no active controller reachable ({reasons})"
        )
