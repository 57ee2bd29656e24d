"""The Kafka listener over real sockets: ordering, concurrency, acks=0, bad input, fuzz."""

from __future__ import annotations

import random
import struct
import threading
import time
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.handler import CloseConnectionError, RequestContext
from broker.listener.server import KafkaServer
from tests.support import kafka_wire
from tests.support.kafka_wire import (
    OneTopicHandler,
    WireClient,
    encode_request,
    sample_message,
)
from tests.support.polling import poll_until
from tiered.kafka.messages import response_type_for
from tiered.kafka.records import Record, build_batch

METADATA_AND_PRODUCE = ApiVersionRegistry({18: (0, 4), 3: (0, 12), 0: (3, 11)})
API_VERSIONS = ApiVersionsRequest(client_software_name="wire", client_software_version="1")
METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def serving(handler: Any, **settings: Any) -> AbstractContextManager[KafkaServer]:
    return kafka_wire.serving(handler, METADATA_AND_PRODUCE, **settings)


def assert_still_serving(server: KafkaServer) -> None:
    client = WireClient(server.address)
    try:
        response = client.call(API_VERSIONS, 4242)
        assert response.error_code is ErrorCode.none
        assert {k.api_key for k in response.api_keys} == {0, 3, 18}
    finally:
        client.close()


def produce_request(acks: int) -> Any:
    request = sample_message(METADATA_AND_PRODUCE.schema(0, 9).request_type, array_length=1)
    topic = request.topic_data[0]
    partition = topic.partition_data[0]
    batch = build_batch([Record(b"k", b"v", (("h", None),), 1)])
    return type(request)(
        transactional_id=None,
        acks=acks,
        timeout=request.timeout,
        topic_data=(
            type(topic)(name="orders", partition_data=(type(partition)(index=0, records=batch),)),
        ),
    )


def test_api_versions_answers_supported_versions_and_falls_back_for_unknown_ones() -> None:
    with serving(OneTopicHandler()) as server:
        client = WireClient(server.address)
        response = client.call(API_VERSIONS, 1)
        assert isinstance(response, ApiVersionsResponse)
        assert response.error_code is ErrorCode.none
        client.send_raw(struct.pack(">ihhih", 13, 18, 42, 2, 3) + b"abc")  # ApiVersions v42
        correlation_id, fallback = client.receive(ApiVersionsResponseV0)
        assert correlation_id == 2
        assert fallback.error_code is ErrorCode.unsupported_version
        assert (18, 0, 4) in {(k.api_key, k.min_version, k.max_version) for k in fallback.api_keys}
        assert client.call(API_VERSIONS, 3).error_code is ErrorCode.none  # connection stays open


def test_pipelined_requests_are_answered_in_request_order() -> None:
    class SlowFirst(OneTopicHandler):
        def __init__(self) -> None:
            super().__init__()
            self.delays = iter([0.3, 0.2, 0.1])

        def metadata(self, request: Any, context: RequestContext) -> Any:
            time.sleep(next(self.delays, 0.0))
            return super().metadata(request, context)

    with serving(SlowFirst()) as server:
        client = WireClient(server.address)
        frames = [encode_request(METADATA if i % 2 else API_VERSIONS, 100 + i) for i in range(20)]
        client.send_raw(b"".join(frames))
        for i in range(20):
            response_type = MetadataResponse if i % 2 else ApiVersionsResponse
            correlation_id, response = client.receive(response_type)
            assert correlation_id == 100 + i
            if i % 2:
                assert [t.name for t in response.topics] == ["orders"]


def test_delayed_answers_hold_no_worker_and_keep_request_order() -> None:
    class Deferred(OneTopicHandler):
        """The first Metadata waits (as a long-poll Fetch would) until another arrives."""

        def __init__(self) -> None:
            super().__init__()
            self.pending: Future[Any] | None = None

        def metadata(self, request: Any, context: RequestContext) -> Any:
            response = super().metadata(request, context)
            if self.pending is None:
                self.pending = Future()
                self.first_response = response
                return self.pending
            if not self.pending.done():
                self.pending.set_result(self.first_response)
            return response

    handler = Deferred()
    with serving(handler, handler_threads=1) as server:
        waiting = WireClient(server.address)
        waiting.send_raw(encode_request(METADATA, 1) + encode_request(API_VERSIONS, 2))
        poll_until(lambda: handler.pending is not None, what="the handler to hold a request")
        other = WireClient(server.address)  # served by the only worker thread
        assert other.call(METADATA, 3).topics[0].name == "orders"
        assert waiting.receive(MetadataResponse)[0] == 1
        assert waiting.receive(ApiVersionsResponse)[0] == 2


def test_a_blocked_handler_does_not_stall_other_connections() -> None:
    class Gated(OneTopicHandler):
        def __init__(self) -> None:
            super().__init__()
            self.gate = threading.Event()
            self.waiting = threading.Event()

        def metadata(self, request: Any, context: RequestContext) -> Any:
            if not self.waiting.is_set():
                self.waiting.set()
                assert self.gate.wait(10)
            return super().metadata(request, context)

    handler = Gated()
    with serving(handler) as server:
        blocked = WireClient(server.address)
        blocked.send(METADATA, 1)
        poll_until(handler.waiting.is_set, what="the handler to wait")
        other = WireClient(server.address)
        assert [t.name for t in other.call(METADATA, 2).topics] == ["orders"]
        handler.gate.set()
        assert blocked.receive(MetadataResponse)[0] == 1


def test_acks_zero_produce_gets_no_response_and_the_connection_keeps_serving() -> None:
    handler = OneTopicHandler()
    with serving(handler) as server:
        client = WireClient(server.address)
        client.send(produce_request(acks=0), 1)
        client.send(API_VERSIONS, 2)
        assert client.receive(ApiVersionsResponse)[0] == 2
        response = client.call(produce_request(acks=1), 3)
        assert response.responses[0].partition_responses[0].base_offset == 1
        assert [acks for acks, _ in handler.produced] == [0, 1]
        assert handler.produced[0][1][0].record == Record(b"k", b"v", (("h", None),), 1)


@pytest.mark.parametrize("receive_buffer_bytes", [None, 4096])  # the OS's; a window of a few KiB
def test_frames_larger_than_the_read_buffer_and_many_in_one_send_are_read_whole(
    receive_buffer_bytes: int | None,
) -> None:
    handler = OneTopicHandler()
    request = produce_request(acks=1)
    values = [bytes([i]) * size for i, size in enumerate([70_000, 1, 300_000, 65_536 - 200])]
    frames = b""
    for i, value in enumerate(values):
        partition = request.topic_data[0].partition_data[0]
        batch = build_batch([Record(b"k", value, (), 1)])
        topic = type(request.topic_data[0])(
            name="orders", partition_data=(type(partition)(index=0, records=batch),)
        )
        frames += encode_request(
            type(request)(
                transactional_id=None, acks=1, timeout=request.timeout, topic_data=(topic,)
            ),
            10 + i,
        )
        frames += encode_request(API_VERSIONS, 100 + i)
    with serving(handler, receive_buffer_bytes=receive_buffer_bytes) as server:
        client = WireClient(server.address)
        client.send_raw(frames)  # arrives in whatever pieces TCP makes of 0.5 MB
        for i in range(len(values)):
            assert client.receive(response_type_for(request))[0] == 10 + i
            assert client.receive(ApiVersionsResponse)[0] == 100 + i
    assert [records[0].record.value for _, records in handler.produced] == values


@pytest.mark.parametrize("fault", ["raises", "closes", "returns None", "wrong version"])
def test_a_failing_handler_closes_only_its_connection(fault: str) -> None:
    class Faulty(OneTopicHandler):
        def metadata(self, request: Any, context: RequestContext) -> Any:
            if fault == "raises":
                raise RuntimeError("storage is on fire")
            if fault == "closes":
                raise CloseConnectionError("the protocol's answer")
            if fault == "returns None":
                return None
            return super().metadata(MetadataRequestV1(topics=None), context)

    with serving(Faulty()) as server:
        client = WireClient(server.address)
        client.send(METADATA, 1)
        assert client.closed_by_peer()
        assert_still_serving(server)


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", 1025),  # over socket.request.max.bytes: never waits for the body
        struct.pack(">i", 2**31 - 1),
        struct.pack(">i", -5),
        struct.pack(">ihhih", 10, 999, 0, 1, -1),  # unknown api key
        struct.pack(">ihhih", 10, 3, 13, 1, -1),  # metadata v13: not advertised
        struct.pack(">ihhih", 10, 3, 1, 1, -1),  # metadata v1 without its topics array
        struct.pack(">i", 2) + b"\x00\x03",
    ],
)
def test_bad_frames_close_the_connection_after_answering_what_came_before(frame: bytes) -> None:
    with serving(OneTopicHandler(), max_request_bytes=1024) as server:
        client = WireClient(server.address)
        client.send_raw(encode_request(API_VERSIONS, 1) + frame)
        assert client.receive(ApiVersionsResponse)[0] == 1
        assert client.closed_by_peer()
        assert_still_serving(server)


def test_idle_and_half_sent_connections_are_closed() -> None:
    with serving(OneTopicHandler(), connections_max_idle_s=0.3) as server:
        silent = WireClient(server.address)
        trickle = WireClient(server.address)
        trickle.send_raw(struct.pack(">i", 100) + b"\x00\x12")
        assert silent.closed_by_peer(5)
        assert trickle.closed_by_peer(5)
        assert_still_serving(server)


def test_wire_fuzz_never_stops_the_listener() -> None:
    rng = random.Random(14)
    valid = [
        encode_request(API_VERSIONS, 1),
        encode_request(METADATA, 2),
        encode_request(produce_request(1), 3),
    ]
    with serving(OneTopicHandler(), max_request_bytes=4096) as server:
        survivor = WireClient(server.address)
        for case in range(300):
            client = WireClient(server.address)
            kind = case % 5
            if kind == 0:
                payload = rng.randbytes(rng.randint(1, 200))
            elif kind == 1:  # truncated valid frame, then EOF
                frame = rng.choice(valid)
                payload = frame[: rng.randint(1, len(frame) - 1)]
            elif kind == 2:  # valid frame with random bytes flipped
                payload = bytearray(rng.choice(valid))
                for _ in range(rng.randint(1, 4)):
                    payload[rng.randrange(4, len(payload))] = rng.randrange(256)
                payload = bytes(payload)
            elif kind == 3:  # random api key/version with a random body
                body = struct.pack(">hhih", rng.randint(-5, 100), rng.randint(-2, 20), case, -1)
                body += rng.randbytes(rng.randint(0, 64))
                payload = struct.pack(">i", len(body)) + body
            else:  # huge or negative size prefix
                payload = struct.pack(">i", rng.choice([2**31 - 1, 4097, -1, 10**9]))
            client.send_raw(payload)
            client.close()
        assert survivor.call(METADATA, 7).topics[0].name == "orders"
        assert_still_serving(server)


def test_many_concurrent_connections_are_served() -> None:
    with serving(OneTopicHandler()) as server:
        clients = [WireClient(server.address) for _ in range(500)]
        for n, client in enumerate(clients):
            client.send(API_VERSIONS, n)
        for n, client in enumerate(clients):
            assert client.receive(ApiVersionsResponse)[0] == n
            client.close()


def test_listener_refuses_a_handler_missing_an_advertised_api() -> None:
    with pytest.raises(ValueError, match="produce"):
        KafkaServer(object(), registry=METADATA_AND_PRODUCE)  # type: ignore[arg-type]
    server = KafkaServer(OneTopicHandler(), registry=METADATA_AND_PRODUCE)
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.address


def test_stop_closes_open_connections() -> None:
    server = KafkaServer(OneTopicHandler(), registry=METADATA_AND_PRODUCE)
    server.start()
    client = WireClient(server.address)
    assert client.call(API_VERSIONS, 1).error_code is ErrorCode.none
    server.stop()
    assert client.closed_by_peer()
