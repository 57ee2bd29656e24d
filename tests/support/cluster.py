"""A real cluster for integration tests: controllers (an active one and a standby) and brokers
as separate processes, in KRaft or ZooKeeper mode, with an AdminClient and per-broker stubs.

Every process listens on 127.0.0.1, or, with ``loopback_hosts`` (a partition test, inside its
network namespace), on a loopback address of its own (``Cluster.hosts``), from which its
ZooKeeper connections come too (``source.address``), so that ``tests.support.network`` can cut
the links between two of them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc
import pytest

from cli.launch.ports import LOOPBACK, free_port
from tests.support.batches import one_batch_each
from tests.support.polling import poll_until
from tests.support.processes import DaemonProcess
from tiered import rlmm
from tiered.admin import AdminClient, TopicDescription
from tiered.api import RemoteLogSegmentMetadata, RemoteResourceNotFoundException, TopicIdPartition
from tiered.cluster.model import TieredState
from tiered.net import GRPC, KAFKA_LISTENER_NAMES, parse_listeners
from tiered.rpc.channels import open_channel
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import records_pb2
from tiered.source_address import KEY as SOURCE_ADDRESS


def broker_properties(
    root: Path,
    mode: str,
    broker_id: int,
    port: int,
    bootstrap: str,
    zk_connect: str | None,
    task_interval_ms: int = 100,
    kafka_port: int = 0,
    host: str = LOOPBACK,
) -> dict[str, str]:
    """A broker's properties in a cluster under ``root`` (its log dir, a shared sqlite RLMM and
    remote root), linked to the controllers by ``bootstrap`` (kraft) or ``zk_connect``: gRPC on
    ``port``, the Kafka listener on ``kafka_port`` (0: a free port the broker registers), both on
    ``host``."""
    props = {
        "node.id": str(broker_id),
        "listeners": f"GRPC://{host}:{port},PLAINTEXT://{host}:{kafka_port}",
        "log.dirs": str(root / f"broker-{broker_id}"),
        "rlmm.sqlite.path": str(root / "rlmm.db"),
        "remote.storage.root": str(root / "remote"),
        "remote.log.manager.task.interval.ms": str(task_interval_ms),
        "broker.heartbeat.interval.ms": "200",
    }
    if mode == "kraft":
        props["controller.quorum.bootstrap.servers"] = bootstrap
    else:
        assert zk_connect is not None
        props["zookeeper.connect"] = zk_connect
    return props


def loopback_hosts(controllers: int, brokers: int) -> dict[str, str]:
    """A loopback address for each process of a cluster, by process name: ``controller-I`` on
    127.0.0.1(1+I), ``broker-N`` on 127.0.0.(20+N); 127.0.0.10 is left for a ZooKeeper server."""
    hosts = {f"controller-{i}": f"127.0.0.{11 + i}" for i in range(controllers)}
    hosts.update({f"broker-{b}": f"127.0.0.{20 + b}" for b in range(1, brokers + 1)})
    return hosts


def grpc_address(properties: Mapping[str, str]) -> str:
    """``host:port`` of a daemon's gRPC listener, from its properties."""
    return parse_listeners(properties["listeners"])[GRPC].address


def kafka_address(properties: Mapping[str, str]) -> str:
    """``host:port`` of a broker's Kafka listener (the first of PLAINTEXT, SSL, SASL_PLAINTEXT,
    SASL_SSL it has), from its properties."""
    listeners = parse_listeners(properties["listeners"])
    return next(listeners[n] for n in KAFKA_LISTENER_NAMES if n in listeners).address


class Cluster:
    def __init__(
        self,
        root: Path,
        mode: str,
        zk_connect: str | None = None,
        brokers: int = 2,
        controller_extra: dict[str, str] | None = None,
        broker_extra: dict[str, str] | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        hosts: Mapping[str, str] | None = None,
    ) -> None:
        """``credentials``: of the test's own gRPC channels (admin, broker stubs), for a cluster
        whose gRPC is TLS. ``hosts``: each process's own loopback address by name (from
        ``loopback_hosts``), else every one is on 127.0.0.1."""
        controller_extra = controller_extra or {}
        self._credentials = credentials
        self.root = root
        self.mode = mode
        self.hosts: dict[str, str] = dict(hosts or {})
        self.controllers: list[DaemonProcess] = []
        self.brokers: dict[int, DaemonProcess] = {}
        names = ["controller-0", "controller-1"]
        ports = [free_port(self._host(n)) for n in names]
        for i, port in enumerate(ports):
            props = {
                "node.id": str(100 + i),
                "listeners": f"{self._host(names[i])}:{port}",
                **self._source_address(names[i]),
                "metadata.store": mode,
                "broker.session.timeout.ms": "3000",
                "controller.retry.backoff.ms": "50",
                "controller.retry.backoff.max.ms": "500",
                "controller.request.timeout.ms": "5000",
                # the brokers' remote storage and RLMM, for the bulk-delete job
                "remote.storage.root": str(root / "remote"),
                "rlmm.sqlite.path": str(root / "rlmm.db"),
                "spark.master": "local[2]",
                **controller_extra,
            }
            if mode == "kraft":
                props["metadata.log.dir"] = str(root / "metadata")
            else:
                assert zk_connect is not None
                props["zookeeper.connect"] = zk_connect
                props["zookeeper.session.timeout.ms"] = "4000"
                props["zookeeper.suspended.grace.ms"] = "1000"
            self.controllers.append(
                DaemonProcess("controller.main", root / f"controller-{i}.properties", props)
            )
        self.bootstrap = ",".join(f"{self._host(n)}:{p}" for n, p in zip(names, ports, strict=True))
        for broker_id in range(1, brokers + 1):
            host = self._host(f"broker-{broker_id}")
            props = {
                **broker_properties(
                    root,
                    mode,
                    broker_id,
                    free_port(host),
                    self.bootstrap,
                    zk_connect,
                    kafka_port=free_port(host),
                    host=host,
                ),
                **self._source_address(f"broker-{broker_id}"),
                **(broker_extra or {}),
            }
            self.brokers[broker_id] = DaemonProcess(
                "broker.main", root / f"broker-{broker_id}.properties", props
            )
        self.admin = AdminClient(self.bootstrap, timeout_s=30, credentials=credentials)
        self._stubs: dict[int, pb_grpc.BrokerServiceStub] = {}
        self._channels: list[grpc.Channel] = []

    def _host(self, name: str) -> str:
        return self.hosts.get(name, LOOPBACK)

    def _source_address(self, name: str) -> dict[str, str]:
        """``source.address`` on the process's own address, if it has one: a cut by destination
        then drops ZooKeeper's answers to it too."""
        return {SOURCE_ADDRESS: self.hosts[name]} if name in self.hosts else {}

    def start(self) -> None:
        for controller in self.controllers:
            controller.start()
        self.controllers[0].wait_for_line("Active as controller")
        for broker in self.brokers.values():
            broker.start()
        self.wait_for_live_brokers(set(self.brokers))

    def wait_for_live_brokers(self, expected: set[int], timeout_s: float = 30) -> None:
        def live() -> bool:
            try:
                cluster = self.admin.describe_cluster()
            except Exception:
                return False
            return {b.broker_id for b in cluster.brokers if not b.fenced} >= expected

        poll_until(live, timeout=timeout_s, what=f"brokers {sorted(expected)} to register")

    @property
    def kafka_bootstrap(self) -> str:
        """The brokers' Kafka listeners, ``host:port,...`` in broker-id order."""
        return ",".join(kafka_address(b.properties) for _, b in sorted(self.brokers.items()))

    def active_controller(self) -> DaemonProcess:
        endpoint = self.admin.describe_cluster().controller_endpoint
        for controller in self.controllers:
            if controller.properties["listeners"] == endpoint:
                return controller
        raise AssertionError(f"no controller listens on {endpoint}")

    def broker_stub(self, broker_id: int) -> pb_grpc.BrokerServiceStub:
        stub = self._stubs.get(broker_id)
        if stub is None:
            channel = open_channel(
                grpc_address(self.brokers[broker_id].properties), credentials=self._credentials
            )
            self._channels.append(channel)
            stub = pb_grpc.BrokerServiceStub(channel)
            self._stubs[broker_id] = stub
        return stub

    def produce(self, topic: TopicDescription, partition: int, count: int, size: int = 100) -> int:
        """Appends ``count`` records to a partition through its leader; returns the last offset."""
        leader = topic.partitions[partition].leader
        response = self.broker_stub(leader).Produce(
            pb.ProduceRequest(
                partition=records_pb2.TopicIdPartition(
                    topic_id=topic.topic_id.bytes, topic=topic.name, partition=partition
                ),
                records=one_batch_each(f"{i:08d}".encode() * (size // 8) for i in range(count)),
            ),
            timeout=30,
        )
        assert response.error.code == 0, response.error
        return response.last_offset

    def fetch(self, topic: TopicDescription, partition: int, offset: int) -> pb.FetchResponse:
        leader = topic.partitions[partition].leader
        return self.broker_stub(leader).Fetch(
            pb.FetchRequest(
                partition=records_pb2.TopicIdPartition(
                    topic_id=topic.topic_id.bytes, topic=topic.name, partition=partition
                ),
                offset=offset,
                max_bytes=1 << 20,
            ),
            timeout=30,
        )

    def log_dirs(self, broker_id: int) -> dict[tuple[uuid.UUID, int], pb.PartitionLogDir]:
        response = self.broker_stub(broker_id).DescribeLogDirs(
            pb.DescribeLogDirsRequest(), timeout=10
        )
        return {
            (uuid.UUID(bytes=d.partition.topic_id), d.partition.partition): d
            for d in response.partitions
        }

    def wait_for_state(
        self, name: str, state: TieredState, timeout_s: float = 60
    ) -> TopicDescription:
        found: list[TopicDescription] = []

        def reached() -> bool:
            try:
                topic = self.admin.describe_topic(name, include_partition_state=False)
            except Exception:
                return False
            found[:] = [topic]
            return topic.tiered_state is state

        poll_until(reached, timeout=timeout_s, what=f"topic {name} to be {state.value}")
        return found[0]

    def tiered_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str],
        records: int = 200,
        expire_locally: bool = False,
    ) -> TopicDescription:
        """Creates a topic, produces ``records`` to each partition and waits until each has
        tiered a few segments (and, with ``expire_locally``, expired local ones)."""
        self.admin.create_topic(name, partitions, dict(configs))
        topic = self.admin.describe_topic(name)
        for p in range(partitions):
            poll_until(
                lambda p=p: (topic.topic_id, p) in self.log_dirs(topic.partitions[p].leader),
                timeout=30,
                what=f"partition {p} to be hosted",
            )
            self.produce(topic, p, records)
        for p in range(partitions):
            poll_until(
                lambda p=p: self.admin.describe_topic(name).partitions[p].remote_segment_count > 3,
                timeout=30,
                what=f"partition {p} to tier segments",
            )
            if expire_locally:
                poll_until(
                    lambda p=p: (
                        (self.admin.describe_topic(name).partitions[p].local_log_start_offset or 0)
                        > 0
                    ),
                    timeout=30,
                    what=f"partition {p} to expire local segments",
                )
        return self.admin.describe_topic(name)

    def rlmm_properties(self) -> dict[str, str]:
        """How a process of this cluster opens the RLMM the brokers share."""
        return {"rlmm.sqlite.path": str(self.root / "rlmm.db")}

    def remote_segments(
        self, topic: TopicDescription, partition: int
    ) -> list[RemoteLogSegmentMetadata]:
        """What the shared RLMM lists for a partition ([] once its metadata is gone)."""
        manager = rlmm.create(self.rlmm_properties())
        try:
            tp = TopicIdPartition(topic.topic_id, topic.name, partition)
            return list(manager.list_remote_log_segments(tp))
        except RemoteResourceNotFoundException:
            return []
        finally:
            manager.close()

    def dump_logs(self) -> str:
        parts = []
        for process in [*self.controllers, *self.brokers.values()]:
            parts.append(f"===== {process.config.name}\n{''.join(process.output[-60:])}")
        return "\n".join(parts)

    def close(self) -> None:
        self.admin.close()
        for channel in self._channels:
            channel.close()
        for process in [*self.brokers.values(), *self.controllers]:
            process.close()


def running_cluster(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    mode: str,
    *,
    broker_failpoints: Mapping[int, Mapping[str, str]] | None = None,
    controller_failpoints: Mapping[str, str] | None = None,
    **controller_extra: str,
) -> Iterator[Cluster]:
    """A started cluster for a fixture to yield from; its processes' logs are printed when the
    test failed (see ``pytest_runtest_makereport`` in conftest). ``broker_failpoints`` arms fail
    points in brokers (by id) for their first start, ``controller_failpoints`` in the first
    (active) controller."""
    zk_connect = request.getfixturevalue("zk_connect") if mode == "zookeeper" else None
    c = Cluster(tmp_path, mode, zk_connect, controller_extra=controller_extra)
    for broker_id, points in (broker_failpoints or {}).items():
        c.brokers[broker_id].failpoints = dict(points)
    c.controllers[0].failpoints = dict(controller_failpoints or {})
    try:
        c.start()
        yield c
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            print(c.dump_logs())
        c.close()
