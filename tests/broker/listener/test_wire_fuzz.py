"""Bad input on a real broker's Kafka port, in both metadata modes (issue 14,
docs/kafka-compatibility.md): random bytes, truncated frames, a size over
``socket.request.max.bytes``, unknown API keys and versions, requests for topics that do not exist,
and a sample request of every API in every advertised version. Each gets the protocol's error or a
closed connection; the broker never crashes, never allocates a claimed size, keeps serving everyone
else, and nothing changes."""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from broker.groups.placement import OFFSETS_TOPIC
from broker.listener.api_versions import ApiVersionRegistry
from tests.support.cluster import Cluster
from tests.support.kafka_cluster import (
    MAX_REQUEST_BYTES,
    MODES,
    connected,
    shared_cluster,
)
from tests.support.kafka_wire import WireClient, encode_request, sample_message
from tests.support.polling import poll_until

pytestmark = pytest.mark.processes

REGISTRY = ApiVersionRegistry()  # what the brokers advertise
API_VERSIONS = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
KEPT = "kept"


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with shared_cluster(request, tmp_path_factory.mktemp(f"kafka-fuzz-{request.param}")) as c:
        c.admin.create_topic(KEPT, 2, {"remote.storage.enable": "true"})
        yield c


def snapshot(cluster: Cluster) -> Any:
    """Everything a request could change: topics (configs, state, epoch, placement), brokers."""
    topics = cluster.admin.describe_topics(include_partition_state=False)
    brokers = [(b.broker_id, b.fenced) for b in cluster.admin.describe_cluster().brokers]
    return topics, brokers


def rss_kib(cluster: Cluster, broker_id: int) -> int:
    process = cluster.brokers[broker_id].process
    assert process is not None
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def assert_serving(cluster: Cluster, bystander: WireClient) -> None:
    """The connection opened before the bad input still works, so do new ones, and the brokers
    are alive."""
    assert bystander.call(API_VERSIONS, 99).error_code is KafkaErrorCode.none
    for broker_id, broker in cluster.brokers.items():
        assert broker.process is not None and broker.process.poll() is None, broker_id
        # A handler that raised closes its connection too, but that is a bug, not bad input.
        assert not [line for line in broker.output if "handler failed" in line], broker_id
        with connected(cluster, broker_id) as client:
            metadata = client.call(everything(), 100)
        assert KEPT in {t.name for t in metadata.topics}


def everything() -> MetadataRequest:
    return MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )


def answered_or_closed(client: WireClient) -> bool:
    """Whether the broker answered (a frame) rather than closing the connection."""
    try:
        client.receive_frame()
    except (ConnectionError, TimeoutError):
        return False
    return True


@pytest.fixture
def bystander(cluster: Cluster) -> Iterator[WireClient]:
    with connected(cluster, 1) as client:
        assert client.call(API_VERSIONS, 1).error_code is KafkaErrorCode.none
        yield client


def test_random_and_mangled_bytes_close_only_their_connection(
    cluster: Cluster, bystander: WireClient
) -> None:
    before = snapshot(cluster)
    rng = random.Random(1414)
    valid = [encode_request(API_VERSIONS, 1), encode_request(everything(), 2)]
    keys = sorted(REGISTRY.ranges)
    for case in range(120):
        kind = case % 4
        if kind == 0:
            payload = rng.randbytes(rng.randint(1, 300))
        elif kind == 1:  # a valid frame with bytes flipped
            mangled = bytearray(rng.choice(valid))
            for _ in range(rng.randint(1, 4)):
                mangled[rng.randrange(4, len(mangled))] = rng.randrange(256)
            payload = bytes(mangled)
        else:  # a supported api key and version with a random body
            key = rng.choice(keys)
            low, high = REGISTRY.ranges[key]
            body = struct.pack(">hhih", key, rng.randint(low, high), case, -1)
            body += rng.randbytes(rng.randint(0, 120))
            payload = struct.pack(">i", len(body)) + body
        with connected(cluster, 1 + case % 2) as client:
            client.send_raw(payload)
            client.sock.shutdown(socket.SHUT_WR)
            client.sock.settimeout(10)
            while answered_or_closed(client):  # answers, then the end of the connection
                pass
    assert_serving(cluster, bystander)
    assert snapshot(cluster) == before


def test_truncated_frames_and_oversized_prefixes_are_closed_without_reading(
    cluster: Cluster, bystander: WireClient
) -> None:
    before = snapshot(cluster)
    rss_before = rss_kib(cluster, 1)
    frame = encode_request(everything(), 5)
    for payload in (
        frame[:9],
        frame[: len(frame) - 1],
        struct.pack(">i", MAX_REQUEST_BYTES + 1),
        struct.pack(">i", 2**31 - 1),
        struct.pack(">i", -1),
    ):
        with connected(cluster, 1) as client:
            client.send_raw(payload)
            if len(payload) > 4:  # a truncated frame: the client goes away mid-frame
                client.sock.shutdown(socket.SHUT_WR)
            assert client.closed_by_peer(10), payload[:8]
    assert rss_kib(cluster, 1) - rss_before < 64 * 1024  # nothing of the claimed size
    assert_serving(cluster, bystander)
    assert snapshot(cluster) == before


def test_unknown_api_keys_and_versions(cluster: Cluster, bystander: WireClient) -> None:
    for header in (
        struct.pack(">hhih", 999, 0, 7, -1),  # no such api
        struct.pack(">hhih", 3, 99, 7, -1),  # Metadata v99
        struct.pack(">hhih", 0, 2, 7, -1),  # Produce v2: below the advertised range
    ):
        with connected(cluster, 2) as client:
            client.send_raw(struct.pack(">i", len(header)) + header)
            assert client.closed_by_peer(10)
    with connected(
        cluster, 2
    ) as client:  # ApiVersions of a version the broker does not know: the v0 fallback
        header = struct.pack(">hhih", 18, 99, 8, -1)
        client.send_raw(struct.pack(">i", len(header)) + header)
        correlation, answer = client.receive(ApiVersionsResponseV0)
    assert (correlation, answer.error_code) == (8, KafkaErrorCode.unsupported_version)
    assert {k.api_key for k in answer.api_keys} == set(REGISTRY.ranges)
    assert_serving(cluster, bystander)


def test_metadata_for_topics_that_do_not_exist_creates_nothing(
    cluster: Cluster, bystander: WireClient
) -> None:
    before = snapshot(cluster)
    request = MetadataRequest(
        topics=(
            MetadataRequestTopic(topic_id=None, name="does-not-exist"),
            MetadataRequestTopic(topic_id=None, name="bad/name"),
            MetadataRequestTopic(topic_id=None, name=KEPT),
        ),
        allow_auto_topic_creation=False,  # as consumers ask: nothing is created
        include_topic_authorized_operations=True,
    )
    response = bystander.call(request, 3)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("does-not-exist", KafkaErrorCode.unknown_topic_or_partition),
        ("bad/name", KafkaErrorCode.invalid_topic_exception),
        (KEPT, KafkaErrorCode.none),
    ]
    assert snapshot(cluster) == before


def test_every_api_and_version_answers_a_sample_request(
    cluster: Cluster, bystander: WireClient
) -> None:
    """Requests with every field set (topic "ab", resource type 1, validate_only true, ...):
    each is answered in its own version, and none of them changes anything (but the first
    FindCoordinator, which creates ``__consumer_offsets`` as Kafka's does: done first)."""
    with connected(cluster, 1) as client:
        client.call(FindCoordinatorRequest(key_type=0, coordinator_keys=("fuzz",)), 4)
    poll_until(
        lambda: any(t.name == OFFSETS_TOPIC for t in cluster.admin.describe_topics()),
        what="__consumer_offsets",
    )
    before = snapshot(cluster)
    for i, (key, (low, high)) in enumerate(REGISTRY.ranges.items()):
        with connected(cluster, 1 + i % 2) as client:
            for version in range(low, high + 1):
                request = sample_message(REGISTRY.schema(key, version).request_type, 1)
                response = client.call(request, version)
                assert (response.__api_key__, response.__version__) == (key, version)
    assert_serving(cluster, bystander)
    assert snapshot(cluster) == before
