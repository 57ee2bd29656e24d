"""One blocking client connection to a broker's Kafka listener: frames out and in (kio's
writers and readers), then, in ``open_connection``, what Kafka's clients do first on a
connection: TLS, ApiVersions (which versions this client may use of each API), and a SCRAM
login (SaslHandshake v1, then SaslAuthenticate rounds) on a SASL listener.

Every read has a deadline. ``KafkaConnection.call`` is the raw exchange (socket errors raise as
they come: what a test of a listener looks at); everything else reports a failure as a
TieredError naming the broker: BROKER_NOT_AVAILABLE when it cannot be reached or closes the connection,
REQUEST_TIMED_OUT when it does not answer, SASL_AUTHENTICATION_FAILED with the broker's message
for a refused login, UNSUPPORTED_VERSION when broker and client share no version of an API.
"""

from __future__ import annotations

import contextlib
import io
import socket
import ssl
import struct
from collections.abc import Iterator, Mapping
from typing import Any

from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.index import api_key_map
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestPayload

from cli.kafka_client.client_security import KafkaClientSecurity, ScramLogin
from cli.kafka_client.scram_client import ScramClientError, ScramSaslClient
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.messages import build, response_type_for

__all__ = [
    "CLIENT_API_VERSIONS",
    "KafkaConnection",
    "encode_request",
    "kafka_error",
    "open_connection",
    "scram_login",
]

_SIZE = struct.Struct(">i")
DEFAULT_CLIENT_ID = "tiered-admin"

# What this client can build and read, per api key: (lowest, highest). A version's messages are
# built with ``tiered.kafka.messages.build``, so versions that only add or drop fields share code;
# the ranges stop before a version that changes shape (OffsetFetch v8 batches groups, ...).
CLIENT_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    2: (1, 8),  # ListOffsets
    3: (1, 12),  # Metadata
    8: (2, 9),  # OffsetCommit
    9: (1, 7),  # OffsetFetch (v8 batches groups)
    10: (1, 6),  # FindCoordinator (v4+ batches keys)
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    42: (0, 2),  # DeleteGroups
    47: (0, 0),  # OffsetDelete
}


# Kafka's own words for the errors a group tool meets (its Errors enum), for answers that carry
# a code and no message.
KAFKA_MESSAGES: Mapping[int, str] = {
    3: "This server does not host this topic-partition.",
    15: "The coordinator is not available.",
    16: "This is not the correct coordinator.",
    24: "The configured groupId is invalid.",
    29: "Topic authorization failed.",
    30: "Group authorization failed.",
    68: "The group is not empty.",
    69: "The group id does not exist.",
    86: "The consumer group is actively subscribed to the topic.",
}


def _api_name(api_key: int) -> str:
    """Kafka's name of an API (``offset_fetch`` -> ``OffsetFetch``)."""
    return "".join(part.title() for part in api_key_map[api_key].split("_"))


def kafka_error(code: int, message: str | None = None) -> TieredError:
    """A Kafka error code as this project's error (Kafka's name, when this project does not
    know the code); ``message`` defaults to Kafka's words for the code."""
    if message is None:
        message = KAFKA_MESSAGES.get(int(code), "the broker gave no message")
    try:
        return TieredError(ErrorCode(code), message)
    except ValueError:
        known = code in {int(c) for c in KafkaErrorCode}
        name = KafkaErrorCode(code).name.upper() if known else f"error code {code}"
        return TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{name}: {message}")


def decode_response(frame: bytes, response_type: type[Any]) -> tuple[int, Any]:
    """(correlation id, decoded response) of a response frame without its size prefix."""
    header, header_size = entity_reader(response_type.__header_schema__)(frame, 0)
    body, _ = entity_reader(response_type)(frame, header_size)
    return int(header.correlation_id), body


def encode_request(
    request: RequestPayload, correlation_id: int, client_id: str | None = DEFAULT_CLIENT_ID
) -> bytes:
    """A full request frame (size prefix included)."""
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=i16(request.__api_key__),
        request_api_version=i16(request.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    body = io.BytesIO()
    entity_writer(header_type)(body, header)
    entity_writer(type(request))(body, request)
    return _SIZE.pack(body.tell()) + body.getvalue()


class KafkaConnection:
    """Requests and responses on one socket (plain or TLS), in order. ``versions``: the
    versions this client uses per api key, once ``negotiate_versions`` has run."""

    def __init__(
        self, sock: socket.socket, name: str, client_id: str | None = DEFAULT_CLIENT_ID
    ) -> None:
        self.sock = sock
        self.name = name
        self.client_id = client_id
        self.versions: dict[int, int] = {}
        self._next_correlation_id = 1

    # ----------------------------------------------------------------------------- frames

    def send(self, request: RequestPayload, correlation_id: int) -> None:
        self.sock.sendall(encode_request(request, correlation_id, self.client_id))

    def receive_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read_exactly(_SIZE.size))
        return self._read_exactly(size)

    def receive(self, response_type: type[Any]) -> tuple[int, Any]:
        """(correlation id, decoded response) of the next frame."""
        return decode_response(self.receive_frame(), response_type)

    def next_correlation_ids(self, count: int = 1) -> int:
        """The first of ``count`` consecutive correlation ids, taken for requests to send."""
        first = self._next_correlation_id
        self._next_correlation_id += count
        return first

    def call(self, request: RequestPayload, correlation_id: int | None = None) -> Any:
        """The response to ``request``; socket failures raise as they come (OSError,
        ConnectionError for a closed connection, TimeoutError)."""
        if correlation_id is None:
            correlation_id = self.next_correlation_ids()
        self.send(request, correlation_id)
        got, response = self.receive(response_type_for(request))
        if got != correlation_id:
            raise ConnectionError(
                f"{self.name} answered correlation id {got} to request {correlation_id}"
            )
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- versions

    def negotiate_versions(self) -> None:
        """ApiVersions: for each api key this client builds, the highest version both sides
        serve."""
        with self.failures_as_errors():
            answer = self.call(
                ApiVersionsRequest(client_software_name="tiered", client_software_version="1")
            )
        if answer.error_code != KafkaErrorCode.none:
            raise kafka_error(answer.error_code, f"{self.name} refused ApiVersions")
        for entry in answer.api_keys:
            mine = CLIENT_API_VERSIONS.get(int(entry.api_key))
            if mine is None:
                continue
            highest = min(mine[1], int(entry.max_version))
            if highest >= max(mine[0], int(entry.min_version)):
                self.versions[int(entry.api_key)] = highest

    def request(self, api_key: int, **fields: Any) -> Any:
        """The response to a request of ``api_key`` at the negotiated version, built from
        ``fields`` (those the version lacks are dropped); nested structs are built by the
        caller with ``request_type(api_key)``. Socket failures raise as TieredErrors."""
        request = build(self.request_type(api_key), **fields)
        with self.failures_as_errors():
            return self.call(request)

    def request_type(self, api_key: int) -> type[Any]:
        version = self.versions.get(api_key)
        if version is None:
            low, high = CLIENT_API_VERSIONS[api_key]
            raise TieredError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"{self.name} does not serve {_api_name(api_key)} (api key {api_key}) at the "
                f"versions this client speaks, {low} to {high}",
            )
        request_type: type[Any] = load_request_schema(api_key, version)
        return request_type

    # ----------------------------------------------------------------------------- I/O

    def _read_exactly(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError(f"{self.name} closed the connection")
            chunks += chunk
        return bytes(chunks)

    @contextlib.contextmanager
    def failures_as_errors(self) -> Iterator[None]:
        """Socket failures as TieredErrors naming this broker."""
        try:
            yield
        except TimeoutError:
            raise TieredError(
                ErrorCode.REQUEST_TIMED_OUT, f"{self.name} did not answer in time"
            ) from None
        except OSError as e:  # ConnectionError and ssl.SSLError among them
            raise TieredError(
                ErrorCode.BROKER_NOT_AVAILABLE, f"{self.name}: {e.strerror or e}"
            ) from None


def scram_login(connection: KafkaConnection, login: ScramLogin) -> Any:
    """A SCRAM login, as librdkafka makes it (SaslHandshake v1, then SaslAuthenticate): the
    last SaslAuthenticate response, or the first one that is an error (returned, not raised, so
    a caller can look at a refusal)."""
    handshake = connection.call(SaslHandshakeRequest(mechanism=str(login.mechanism)))
    if handshake.error_code != KafkaErrorCode.none:
        raise kafka_error(
            handshake.error_code,
            f"{connection.name} does not take {login.mechanism}; it takes "
            f"{', '.join(handshake.mechanisms) or 'no SASL mechanism'}",
        )
    client = ScramSaslClient(login.mechanism, login.username, login.password)
    first = connection.call(SaslAuthenticateRequest(auth_bytes=client.first_message()))
    if first.error_code != KafkaErrorCode.none:
        return first
    try:
        final = connection.call(
            SaslAuthenticateRequest(auth_bytes=client.final_message(first.auth_bytes))
        )
        if final.error_code == KafkaErrorCode.none:
            client.verify_server_final(final.auth_bytes)
    except ScramClientError as e:
        raise TieredError(ErrorCode.SASL_AUTHENTICATION_FAILED, f"{connection.name}: {e}") from None
    return final


def open_connection(
    host: str,
    port: int,
    security: KafkaClientSecurity,
    *,
    timeout_s: float = 10.0,
    client_id: str | None = DEFAULT_CLIENT_ID,
) -> KafkaConnection:
    """A connection ready for requests: TLS as ``security`` says, versions negotiated, logged
    in on a SASL listener."""
    name = f"{host}:{port}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as e:
        raise TieredError(
            ErrorCode.BROKER_NOT_AVAILABLE, f"cannot connect to {name}: {e.strerror or e}"
        ) from None
    try:
        context = security.ssl_context()
        if context is not None:
            sock = _tls(sock, context, host, name)
        connection = KafkaConnection(sock, name, client_id)
        try:
            connection.negotiate_versions()  # first: a SASL listener serves only it before login
        except TieredError as e:
            if context is None or e.code is not ErrorCode.BROKER_NOT_AVAILABLE:
                raise
            # TLS 1.3: a server judges the client's certificate after the handshake is over.
            raise TieredError(
                e.code,
                f"{name} closed the connection after the TLS handshake: does it require a "
                "client certificate issued by its CA? (ssl.keystore.location, or "
                "ssl.certificate.location and ssl.key.location)",
            ) from None
        if security.scram is not None:
            with connection.failures_as_errors():
                answer = scram_login(connection, security.scram)
            if answer.error_code != KafkaErrorCode.none:
                raise kafka_error(answer.error_code, f"{name}: {answer.error_message}")
        return connection
    except BaseException:
        sock.close()
        raise


def _tls(sock: socket.socket, context: ssl.SSLContext, host: str, name: str) -> ssl.SSLSocket:
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLError as e:
        raise TieredError(
            ErrorCode.BROKER_NOT_AVAILABLE,
            f"the TLS handshake with {name} failed: {e.reason or e}",
        ) from None
    except OSError as e:
        raise TieredError(
            ErrorCode.BROKER_NOT_AVAILABLE, f"{name} closed the TLS handshake: {e.strerror or e}"
        ) from None
