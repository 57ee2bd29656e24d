"""Kafka framing, request headers, the API registry and ApiVersions answers (no sockets)."""

from __future__ import annotations

import io
import struct

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from broker.listener.api_versions import DEFAULT_API_VERSIONS, ApiVersionRegistry
from broker.listener.array_bounds import check_array_bounds
from broker.listener.protocol import (
    BY_REFERENCE_BYTES,
    FrameTooLargeError,
    RequestDecodeError,
    UnsupportedRequestError,
    decode_request,
    encode_response_chunks,
    frame_size,
)
from tests.support.kafka_wire import NO_THROTTLE, encode_request, sample_message
from tiered.kafka.messages import build, has_field, nested

REGISTRY = ApiVersionRegistry()


def encode_response(correlation_id: int, response: object) -> bytes:
    """The whole response frame as the listener sends it, in one piece."""
    return b"".join(encode_response_chunks(correlation_id, response))  # type: ignore[arg-type]


def frame_of(request: object, correlation_id: int = 7, client_id: str | None = "c") -> bytes:
    return encode_request(request, correlation_id, client_id)[4:]  # type: ignore[arg-type]


def test_frame_size_accepts_up_to_the_limit_and_rejects_beyond_or_negative() -> None:
    assert frame_size(struct.pack(">i", 1024), 1024) == 1024
    for size in (1025, 2**31 - 1, -1):
        with pytest.raises(FrameTooLargeError, match=r"socket\.request\.max\.bytes"):
            frame_size(struct.pack(">i", size), 1024)


@pytest.mark.parametrize("client_id", ["console-producer", "", None])
def test_flexible_request_header_v2_decodes_with_nullable_client_id(client_id: str | None) -> None:
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=True
    )
    decoded = decode_request(frame_of(request, 41, client_id), REGISTRY)
    assert (decoded.api_key, decoded.api_version) == (3, 12)
    assert decoded.header.correlation_id == 41
    assert decoded.header.client_id == client_id
    assert decoded.body == request


def test_legacy_request_header_v1_decodes() -> None:
    request = MetadataRequestV1(topics=None)
    decoded = decode_request(frame_of(request), REGISTRY)
    assert decoded.api_version == 1
    assert decoded.body == request


def test_bytes_after_the_body_are_ignored_as_kafka_does() -> None:
    # librdkafka's all-topics Metadata v12 request: a 4-byte array-count placeholder of which
    # only the first byte is the (null) compact array.
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    decoded = decode_request(frame, REGISTRY)
    assert decoded.body == MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def test_unknown_api_key_and_unsupported_version_are_rejected() -> None:
    unknown_key = struct.pack(">hhih", 999, 0, 1, -1)
    with pytest.raises(UnsupportedRequestError, match="api key 999"):
        decode_request(unknown_key, REGISTRY)
    metadata_v13 = struct.pack(">hhih", 3, 13, 1, -1)
    with pytest.raises(UnsupportedRequestError, match="version 13"):
        decode_request(metadata_v13, REGISTRY)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00",
        struct.pack(">hh", 3, 12),  # no correlation id
        struct.pack(">hhih", 3, 12, 1, 50) + b"short",  # client id longer than the frame
        struct.pack(">hhihB", 3, 12, 1, -1, 0) + b"\xff\xff\xff\xff\x0f",  # huge compact array
        struct.pack(">hhihi", 3, 1, 1, -1, 2**31 - 1),  # huge legacy array
    ],
)
def test_frames_that_do_not_decode_raise_request_decode_error(frame: bytes) -> None:
    with pytest.raises(RequestDecodeError):
        decode_request(frame, REGISTRY)


def test_unsupported_api_versions_version_is_decoded_without_its_body() -> None:
    frame = struct.pack(">hhih", 18, 99, 5, 3) + b"cli" + b"\xde\xad"
    decoded = decode_request(frame, REGISTRY)
    assert decoded.body is None
    assert decoded.header.correlation_id == 5
    assert decoded.api_version == 99


def test_api_versions_lists_every_supported_range() -> None:
    response = REGISTRY.api_versions_response(3)
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code is ErrorCode.none
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert listed == dict(DEFAULT_API_VERSIONS)


def test_unsupported_api_versions_version_falls_back_to_v0_with_unsupported_version() -> None:
    response = REGISTRY.api_versions_response(99)
    assert isinstance(response, ApiVersionsResponseV0)
    assert response.error_code is ErrorCode.unsupported_version
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}[18] == (0, 4)


def test_registry_refuses_versions_kio_cannot_decode_and_tables_without_api_versions() -> None:
    with pytest.raises(ValueError, match="no schema for api key 32 version 0"):
        ApiVersionRegistry({18: (0, 4), 32: (0, 4)})
    with pytest.raises(ValueError, match="ApiVersions"):
        ApiVersionRegistry({3: (0, 12)})
    with pytest.raises(ValueError, match="bad api key"):
        ApiVersionRegistry({18: (0, 4), 4242: (0, 1)})
    with pytest.raises(ValueError, match="bad api key"):
        ApiVersionRegistry({18: (4, 0)})


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    frame = encode_response(9, REGISTRY.api_versions_response(3))
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 9)
    body, _ = entity_reader(ApiVersionsResponse)(frame, 8)  # no tagged-field byte after the id
    assert body == REGISTRY.api_versions_response(3)


def test_flexible_responses_use_header_v1_with_tagged_fields() -> None:
    response = MetadataResponse(
        throttle_time=NO_THROTTLE, brokers=(), cluster_id="c", controller_id=1, topics=()
    )
    frame = encode_response(77, response)
    assert struct.unpack_from(">iib", frame) == (len(frame) - 4, 77, 0)
    body, size = entity_reader(MetadataResponse)(frame, 9)
    assert body == response
    assert 9 + size == len(frame)


@pytest.mark.parametrize("version", [4, 11, 12])  # legacy and compact records fields
def test_large_records_are_sent_by_reference_and_the_frame_is_what_kio_writes(
    version: int,
) -> None:
    response_type = REGISTRY.schema(1, version).response_type
    big = memoryview(bytes(range(256)) * 600)  # 153,600 bytes
    small = b"tiny records"

    def partition(index: int, records: bytes | memoryview) -> object:
        return build(
            nested(response_type, "PartitionData"),
            partition_index=index,
            error_code=ErrorCode.none,
            high_watermark=10,
            last_stable_offset=10,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=records,
        )

    response = build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
        responses=(
            build(
                nested(response_type, "FetchableTopicResponse"),
                topic="t",
                partitions=(partition(0, big), partition(1, small), partition(2, big)),
            ),
        ),
    )
    chunks = encode_response_chunks(5, response)
    assert [c for c in chunks if c is big] == [big, big]  # not copied
    assert all(len(c) < BY_REFERENCE_BYTES for c in chunks if c is not big)
    reference = io.BytesIO()
    entity_writer(response.__header_schema__)(
        reference, response.__header_schema__(correlation_id=i32(5))
    )
    entity_writer(response_type)(reference, response)
    expected = struct.pack(">i", len(reference.getvalue())) + reference.getvalue()
    assert b"".join(chunks) == expected == encode_response(5, response)


def test_build_keeps_only_the_fields_a_version_has() -> None:
    values = {
        "topics": None,
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    assert build(MetadataRequestV1, **values) == MetadataRequestV1(topics=None)
    assert build(MetadataRequest, **values).allow_auto_topic_creation is True
    assert has_field(MetadataRequest, "allow_auto_topic_creation")
    assert not has_field(MetadataRequestV1, "allow_auto_topic_creation")
    assert nested(MetadataResponse, "MetadataResponseTopic").__version__ == 12
    with pytest.raises(TypeError):
        build(MetadataRequest, topics=None)


def test_round_trip_through_kio_for_api_versions_request() -> None:
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    decoded = decode_request(frame_of(request, 3), REGISTRY)
    assert decoded.body == request
    assert decoded.header.correlation_id == i32(3)


@pytest.mark.parametrize(("api_key", "version"), sorted(REGISTRY._schemas))
def test_bounds_walk_covers_exactly_the_bytes_kio_writes_for_every_served_request(
    api_key: int, version: int
) -> None:
    request_type = REGISTRY.schema(api_key, version).request_type
    for array_length in (0, 3):
        request = sample_message(request_type, array_length)
        frame = frame_of(request)
        decoded = decode_request(frame, REGISTRY)
        assert decoded.body == request
        header_size = len(frame) - len(encode_body(request))
        assert check_array_bounds(request_type, frame, header_size) == len(frame)


def encode_body(request: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "claim", [b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08"]
)
def test_huge_nested_array_claims_are_refused_before_kio_allocates(claim: bytes) -> None:
    # Produce v9: transactional_id (null), acks, timeout, one topic "t" whose partition array
    # claims ~2**32 elements: kio would reserve 32 GiB and abort the process.
    header = struct.pack(">hhih", 0, 9, 1, -1) + b"\x00"
    body = b"\x00" + struct.pack(">hi", 1, 1000) + b"\x02" + b"\x02t" + claim
    with pytest.raises(RequestDecodeError, match="cannot fit"):
        decode_request(header + body, REGISTRY)
