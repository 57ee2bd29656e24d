"""The controller's metrics on their own: the figures kept as state changes (topics per tiered
state, what each broker owes, unfinished delete jobs), the collectors over an in-process
controller on a real KRaft store, the admin-request interceptor behind a real gRPC server, the
endpoint and its configuration keys."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from controller.config import ControllerConfig
from controller.controller import Controller
from controller.jobs.spark_delete import EngineChoice
from controller.jobs.wiring import ObservedDeleteEngine
from controller.metrics import ControllerMetrics
from controller.request_metrics import AdminRequestMetrics
from controller.store.kraft import KRaftMetadataStore
from controller.unfinished_jobs import UnfinishedDeleteJobs, objects_remaining
from tests.support.controller import running_controller
from tests.support.metrics import (
    BULK_DELETE,
    CHANNEL,
    CONTROLLER,
    REQUESTS,
    Samples,
    collect,
    figure,
    scrape,
)
from tests.support.polling import poll_until
from tiered.admin import AdminClient
from tiered.api import DeleteOutcome, RemoteObjectDeleter
from tiered.cluster.model import (
    DeleteJob,
    DeleteJobState,
    MetadataImage,
    PartitionDeleteProgress,
    TieredState,
    TopicMetadata,
)
from tiered.errors import ErrorCode, TieredError
from tiered.metrics_endpoint import MetricsEndpoint, MetricsEndpointError
from tiered.rpc.status import counting_errors, error_to_proto
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc


def of(controller: Controller) -> Samples:
    return collect(
        controller.metrics.registry,
        controller.state_collector(),
    )


def topic(name: str, state: TieredState, replicas: tuple[int, ...] = (1,)) -> TopicMetadata:
    return TopicMetadata(name, uuid.uuid4(), replicas, {}, state, 1)


# ------------------------------------------------------------------------ figures kept on change


def test_the_image_counts_topics_per_state_as_they_change() -> None:
    image = MetadataImage(topics={"a": topic("a", TieredState.ENABLED)})
    image.put_topic(topic("b", TieredState.ENABLED))
    image.put_topic(image.topics["a"].with_tiered_state(TieredState.DISABLING, 2))
    gone = topic("c", TieredState.DISABLED)
    image.put_topic(gone)
    image.put_topic(topic("c", TieredState.ENABLED))  # re-created under the same name
    image.remove_topic(gone.topic_id)  # the old id is not there any more: nothing changes
    image.remove_topic(image.topics["b"].topic_id)
    counts = {s: image.topic_count(s) for s in TieredState}
    recounted = {s: sum(t.tiered_state is s for t in image.topics.values()) for s in TieredState}
    assert (
        counts
        == recounted
        == {
            TieredState.ENABLED: 1,
            TieredState.DISABLING: 1,
            TieredState.DISABLED: 0,
        }
    )
    assert image.copy().topic_count(TieredState.DISABLING) == 1


def test_unfinished_jobs_follow_their_saves() -> None:
    jobs = UnfinishedDeleteJobs()
    a = DeleteJob("a", uuid.uuid4(), 1, 2)
    b = DeleteJob("b", uuid.uuid4(), 3, 1, DeleteJobState.DONE)
    jobs.reset([a, b])
    assert jobs.jobs() == [a]
    running = a.with_state(
        DeleteJobState.RUNNING,
        progress=(PartitionDeleteProgress(0, 10, 4), PartitionDeleteProgress(1)),
    )
    jobs.saved(running)
    assert jobs.jobs() == [running] and objects_remaining(running) == 6
    jobs.saved(running.with_state(DeleteJobState.DONE))
    assert jobs.jobs() == []


# ------------------------------------------------------------------------ collectors


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as controller:
        yield controller


def test_the_active_controller_reports_its_state_and_events(controller: Controller) -> None:
    before = of(controller)
    assert figure(before, CONTROLLER + "activecontrollercount") == 1
    assert figure(before, CONTROLLER + "controllerepoch") == controller.active_epoch
    writes = CONTROLLER + "metadatastorewritelatencyms_count"
    written = figure(before, writes, store="kraft") or 0
    assert written >= 1  # the broker's registration

    controller.admin.create_topic("t", 2, {"remote.storage.enable": "true"})
    controller.admin.create_topic("plain", 1, {})
    controller.admin.alter_configs("t", set_={"remote.storage.enable": "false"})
    after = of(controller)
    assert figure(after, writes, store="kraft") == written + 3
    assert {
        s.value: figure(after, CONTROLLER + "tieredtopiccount", state=s.value) for s in TieredState
    } == {
        "ENABLED": 0,
        "DISABLING": 1,
        "DISABLED": 1,  # a topic never tiered is DISABLED
    }
    assert figure(after, CONTROLLER + "globaltopiccount") == 2
    # Broker 1 (registered at an address nobody listens on) owes both partitions, and the
    # controller's requests to it fail and are retried.
    assert figure(after, CHANNEL + "disableremotetopicpendingentries", broker_id="1") == 2
    assert (
        figure(after, CHANNEL + "disableremotetopicoldestpendingagems", broker_id="1") or 0
    ) >= 0

    def retried_and_failed_again() -> bool:
        samples = of(controller)
        retries = figure(samples, CHANNEL + "requestretriespersec_total", broker_id="1") or 0
        failures = figure(samples, CHANNEL + "requestfailurespersec_total", broker_id="1") or 0
        return retries >= 1 and failures >= 2

    # A retry is counted when it is scheduled, its failure when it fails: wait for both.
    poll_until(retried_and_failed_again, what="a retried request to broker 1 failing again")
    # Broker 1 was reached by its registration, and by nothing since: its calls go unanswered.
    reached = CONTROLLER + "timesincelastreachedms"
    first = figure(of(controller), reached, broker_id="1")
    assert first is not None
    poll_until(
        lambda: (figure(of(controller), reached, broker_id="1") or 0) > first,
        what="the time since broker 1 was reached to grow",
    )


def test_a_standby_reports_itself_inactive_and_nothing_else(tmp_path: Path) -> None:
    store = KRaftMetadataStore.from_config({"metadata.log.dir": str(tmp_path / "meta")})
    config = ControllerConfig.from_properties(
        {"node.id": "101", "metadata.log.dir": str(tmp_path / "meta")}
    )
    standby = Controller(config, store)  # never elected
    try:
        standby.term.image.put_topic(topic("stale", TieredState.ENABLED))
        samples = of(standby)
        assert figure(samples, CONTROLLER + "activecontrollercount") == 0
        assert figure(samples, CONTROLLER + "controllerepoch") == 0
        assert figure(samples, CONTROLLER + "tieredtopiccount", state="ENABLED") == 0
        assert figure(samples, BULK_DELETE + "jobcount", state="PENDING") == 0
    finally:
        standby.close()
        store.close()


def test_a_scrape_does_not_wait_for_a_busy_controller(controller: Controller) -> None:
    state = controller.state_collector(lock_timeout_s=0.05)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with controller.term.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait(10)
        names = {name for name, _ in collect(state)}
    finally:
        release.set()
        holder.join()
    assert names == {CONTROLLER + "activecontrollercount", CONTROLLER + "controllerepoch"}
    assert CONTROLLER + "globaltopiccount" in {name for name, _ in collect(state)}


class _RecordingRunner:
    """Stands in for the delete-job runner: the test saves progress through its ``persist``."""

    def __init__(self, persist: Callable[[DeleteJob], None]) -> None:
        self.persist = persist

    def start(self, jobs: Sequence[DeleteJob] = ()) -> None: ...

    def stop(self, timeout_s: float = 60.0) -> None: ...

    def submit(self, job: DeleteJob) -> None: ...

    def progress(self, job: DeleteJob) -> DeleteJob:
        return job


def test_delete_jobs_are_reported_from_their_job_objects(tmp_path: Path) -> None:
    store = KRaftMetadataStore.from_config({"metadata.log.dir": str(tmp_path / "meta")})
    config = ControllerConfig.from_properties(
        {"node.id": "100", "metadata.log.dir": str(tmp_path / "meta")}
    )
    runners: list[_RecordingRunner] = []

    def runner(persist: Callable[[DeleteJob], None], hold: object) -> _RecordingRunner:
        runners.append(_RecordingRunner(persist))
        return runners[-1]

    controller = Controller(config, store, runner)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,))
    thread.start()
    try:
        assert controller.wait_active(10)
        job = DeleteJob("gone", uuid.uuid4(), 1, 2)
        with controller.term.lock:
            controller.delete_jobs.queued(job)
        queued = of(controller)
        assert figure(queued, BULK_DELETE + "jobcount", state="PENDING") == 1
        labels = {"topic": "gone", "topic_id": str(job.topic_id), "tiered_epoch": "1"}
        assert figure(queued, BULK_DELETE + "objectsremaining", **labels) == 0  # not listed yet
        listed = job.with_state(
            DeleteJobState.RUNNING,
            progress=(PartitionDeleteProgress(0, 7, 2), PartitionDeleteProgress(1, 3, 0)),
        )
        runners[-1].persist(listed)
        running = of(controller)
        assert figure(running, BULK_DELETE + "jobcount", state="PENDING") == 0
        assert figure(running, BULK_DELETE + "jobcount", state="RUNNING") == 1
        assert figure(running, BULK_DELETE + "objectsremaining", **labels) == 8
        runners[-1].persist(replace(listed, state=DeleteJobState.DONE))
        done = of(controller)
        assert figure(done, BULK_DELETE + "jobcount", state="RUNNING") == 0
        assert figure(done, BULK_DELETE + "objectsremaining", **labels) is None
    finally:
        stop.set()
        thread.join(10)
        controller.close()
        store.close()


class _Deleter(RemoteObjectDeleter):
    def delete_objects(self, handles: Sequence[str]) -> DeleteOutcome:
        raise AssertionError("the engine is a stand-in")


class _Engine:
    def __init__(self, outcome: DeleteOutcome | Exception) -> None:
        self.outcome = outcome

    def choose(self, object_count: int) -> EngineChoice:
        return EngineChoice(on_spark=True, reason="stand-in")

    def delete(
        self,
        deleter: RemoteObjectDeleter,
        handles: Sequence[str],
        engine: EngineChoice,
        on_progress: object = None,
    ) -> DeleteOutcome:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def test_deleted_and_failed_objects_are_counted_from_each_delete() -> None:
    metrics = ControllerMetrics("kraft")
    partly = DeleteOutcome(deleted=5, missing=2, failed_handles=("x", "y"))
    observed = ObservedDeleteEngine(_Engine(partly), metrics.objects_deleted)
    observed.delete(_Deleter(), ["h"] * 9, observed.choose(9))
    with pytest.raises(RuntimeError):
        failing = ObservedDeleteEngine(_Engine(RuntimeError("spark died")), metrics.objects_deleted)
        failing.delete(_Deleter(), ["a", "b", "c"], failing.choose(3))
    samples = collect(metrics.registry)
    assert figure(samples, BULK_DELETE + "objectsdeletedpersec_total") == 7
    assert figure(samples, BULK_DELETE + "objectsfailedpersec_total") == 5


# ------------------------------------------------------------------------ admin requests


def test_errors_made_for_responses_are_counted_while_a_call_is_answered() -> None:
    unknown = TieredError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no")
    error_to_proto(unknown)  # nobody counts
    with counting_errors() as counted:
        for error in (unknown, None, unknown, TieredError(ErrorCode.INVALID_CONFIG, "bad")):
            error_to_proto(error)
    error_to_proto(unknown)  # the block ended
    assert counted == {"UNKNOWN_TOPIC_OR_PARTITION": 2, "INVALID_CONFIG": 1}


def test_admin_requests_are_counted_by_request_and_error_at_the_edge(
    controller: Controller,
) -> None:
    server = grpc.server(
        ThreadPoolExecutor(max_workers=4), interceptors=[AdminRequestMetrics(controller.metrics)]
    )
    pb_grpc.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
        controller.admin_servicer(),
        server,
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    admin = AdminClient(f"127.0.0.1:{port}", timeout_s=10)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        admin.create_topic("t", 1, {})
        for name in ("nope", "nope"):
            with pytest.raises(TieredError):
                admin.describe_topic(name)
        with pytest.raises(TieredError):
            admin.create_topic("t", 1, {})
        with pytest.raises(grpc.RpcError) as malformed:  # an operation this controller lacks
            pb_grpc.AdminServiceStub(channel).AlterTopicConfigs(
                pb.AlterTopicConfigsRequest(
                    topics=[
                        pb.TopicConfigAlteration(
                            topic="t", configs=[pb.ConfigAlteration(name="k", operation=99)]
                        )
                    ]
                ),
                timeout=10,
            )
        assert malformed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()
        admin.close()
        server.stop(0).wait()
    samples = collect(controller.metrics.registry)
    errors = REQUESTS + "errorspersec_total"
    assert figure(samples, errors, request="CreateTopics", error="NONE") == 1
    assert figure(samples, errors, request="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1
    assert (
        figure(samples, errors, request="DescribeTopics", error="UNKNOWN_TOPIC_OR_PARTITION") == 2
    )
    assert figure(samples, errors, request="AlterTopicConfigs", error="INVALID_REQUEST") == 1
    assert figure(samples, REQUESTS + "requestspersec_total", request="CreateTopics") == 2
    assert figure(samples, REQUESTS + "requestspersec_total", request="AlterTopicConfigs") == 1


# ------------------------------------------------------------------------ endpoint and keys


def test_metrics_keys_are_parsed_and_bad_ones_named() -> None:
    base = {"node.id": "1", "metadata.log.dir": "/tmp/x"}
    assert ControllerConfig.from_properties(base).metrics_port is None
    config = ControllerConfig.from_properties({**base, "metrics.port": "9404"})
    assert (config.metrics_port, config.metrics_host) == (9404, "127.0.0.1")
    anywhere = ControllerConfig.from_properties(
        {**base, "metrics.port": "0", "metrics.host": "0.0.0.0"}
    )
    assert (anywhere.metrics_port, anywhere.metrics_host) == (0, "0.0.0.0")
    for bad in ("nine", "-1", "65536"):
        with pytest.raises(ValueError, match=r"metrics\.port="):
            ControllerConfig.from_properties({**base, "metrics.port": bad})


def test_the_endpoint_serves_its_collectors_and_names_the_key_of_a_port_in_use() -> None:
    metrics = ControllerMetrics("zookeeper")
    metrics.store_written(0.003)
    endpoint = MetricsEndpoint("127.0.0.1", 0, [metrics.registry])
    try:
        served = scrape(endpoint.url)
        assert (
            figure(served, CONTROLLER + "metadatastorewritelatencyms_count", store="zookeeper") == 1
        )
        with pytest.raises(
            MetricsEndpointError, match=rf"127\.0\.0\.1:{endpoint.port} \(metrics\.port\)"
        ):
            MetricsEndpoint("127.0.0.1", endpoint.port, [])
    finally:
        endpoint.close()
    with socket.socket() as again:  # closed: nothing listens there any more
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", endpoint.port))
        again.listen()
