"""Kafka wire framing: size-prefixed frames, request headers, response encoding (via kio).

A request frame is ``int32 size`` then the request header (v1, or v2 with tagged fields for
flexible versions; client_id is always a legacy nullable string) and the body. Responses carry
header v0 (correlation id) or v1 (plus tagged fields); ApiVersions always answers with v0 so a
client that does not yet know the broker can read it. Anything that does not decode raises a
ProtocolError: the server's answer to it is closing the connection, as Kafka's is.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO, TypeVar, cast

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import Reader
from kio.static.primitive import i32
from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from broker.listener.api_versions import API_VERSIONS_KEY, ApiVersionRegistry, UnsupportedApiError
from broker.listener.array_bounds import ArrayBoundsError, check_array_bounds
from tiered.kafka.record_batch import Buffer

__all__ = [
    "BY_REFERENCE_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "FrameTooLargeError",
    "ProtocolError",
    "Request",
    "RequestDecodeError",
    "UnsupportedRequestError",
    "decode_request",
    "encode_response_chunks",
    "frame_size",
]

SIZE_PREFIX = struct.Struct(">i")
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
_KEY_AND_VERSION = struct.Struct(">hh")
_FIRST_FLEXIBLE_API_VERSIONS = 3
_T = TypeVar("_T")
BY_REFERENCE_BYTES = 32 * 1024  # a write this large is sent from where it lies, not copied
_read_header_v1 = entity_reader(RequestHeaderV1)
_read_header_v2 = entity_reader(RequestHeaderV2)


class ProtocolError(Exception):
    """Bytes on a connection that break the protocol; the connection must be closed."""


class FrameTooLargeError(ProtocolError):
    """A size prefix that is negative or over ``socket.request.max.bytes``."""


class RequestDecodeError(ProtocolError):
    """A frame whose header or body does not decode with the schema it names."""


class UnsupportedRequestError(ProtocolError):
    """An api key or version this listener does not serve (ApiVersions excepted)."""


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request. ``body`` is None only for an ApiVersions request of a version we
    do not know: Kafka answers those without parsing the body (with the v0 fallback)."""

    header: RequestHeader
    body: RequestPayload | None

    @property
    def api_key(self) -> int:
        return int(self.header.request_api_key)

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)


def frame_size(prefix: bytes | memoryview, max_request_bytes: int) -> int:
    """The frame length a 4-byte prefix announces; raises FrameTooLargeError if out of range."""
    size: int = SIZE_PREFIX.unpack(prefix)[0]
    if size < 0 or size > max_request_bytes:
        raise FrameTooLargeError(
            f"request of {size} bytes is outside 0..{max_request_bytes} (socket.request.max.bytes)"
        )
    return size


def decode_request(frame: bytes | memoryview, registry: ApiVersionRegistry) -> Request:
    """Decode one request frame (without its size prefix).

    Raises UnsupportedRequestError for an api key/version outside ``registry`` (any ApiVersions
    version is accepted) and RequestDecodeError for bytes that do not decode.
    """
    if len(frame) < _KEY_AND_VERSION.size:
        raise RequestDecodeError(f"a {len(frame)}-byte frame cannot hold a request header")
    api_key, api_version = _KEY_AND_VERSION.unpack_from(frame)
    if api_key == API_VERSIONS_KEY and not registry.supports(api_key, api_version):
        # Only the correlation id matters for the fallback answer; header v1 is a prefix of v2.
        fallback_header, _ = _decode(_read_header_v1, frame, 0, "request header")
        return Request(fallback_header, None)
    try:
        schema = registry.schema(api_key, api_version)
    except UnsupportedApiError as e:
        raise UnsupportedRequestError(str(e)) from e
    header: RequestHeader
    if schema.request_type.__header_schema__ is RequestHeaderV2:
        header, header_size = _decode(_read_header_v2, frame, 0, "request header")
    else:
        header, header_size = _decode(_read_header_v1, frame, 0, "request header")
    # Bytes after the body are ignored, as Kafka does: librdkafka's all-topics Metadata v9+
    # request carries three stray zero bytes from a placeholder array count.
    try:
        check_array_bounds(schema.request_type, frame, header_size)
    except ArrayBoundsError as e:
        raise RequestDecodeError(f"{schema.name} v{api_version} request: {e}") from e
    body, _ = _decode(schema.read_request, frame, header_size, schema.name)
    return Request(header, body)


def _decode(read: Reader[_T], frame: bytes | memoryview, offset: int, what: str) -> tuple[_T, int]:
    try:
        return read(frame, offset)
    except Exception as e:  # malformed input may surface as any decoding exception
        raise RequestDecodeError(f"{what} does not decode: {type(e).__name__}: {e}") from e


def encode_response_chunks(correlation_id: int, response: ResponsePayload) -> list[Buffer]:
    """The full response frame: size prefix, response header (v0 or v1 as the schema says)
    and body, as chunks to send in order. Record bytes of at least ``BY_REFERENCE_BYTES`` are
    chunks of their own, by reference (a Fetch answer's records are not copied)."""
    frame = _FrameBuffer()
    buffer = cast("IO[bytes]", frame)  # kio's writers only call write()
    header_type = response.__header_schema__
    entity_writer(header_type)(buffer, header_type(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buffer, response)
    return frame.frame_chunks()


class _FrameBuffer:
    """The write side of a stream (all kio's writers use) that coalesces small writes and keeps
    large ones by reference, behind a size prefix filled in at the end."""

    def __init__(self) -> None:
        self._prefix = self._small = bytearray(SIZE_PREFIX.size)
        self._chunks: list[Buffer] = [self._small]
        self._size = 0

    def write(self, data: Buffer) -> int:
        size = len(data)
        self._size += size
        if size < BY_REFERENCE_BYTES:
            self._small += data
        else:
            self._chunks.append(data)
            self._small = bytearray()
            self._chunks.append(self._small)
        return size

    def frame_chunks(self) -> list[Buffer]:
        SIZE_PREFIX.pack_into(self._prefix, 0, self._size)
        return [c for c in self._chunks if c]
