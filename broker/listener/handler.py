"""The contract between the Kafka listener and the broker: one method per API.

Each method is named after kio's schema name for the API (``api_key_map``: ``metadata``,
``produce``, ``describe_configs``, ...), takes the kio request object of whatever version the
client sent plus a RequestContext, and returns a kio response object *of the same version*
(``response_type_for(request)`` gives the class). Methods run on a worker thread and may block
(storage, gRPC to the controller). Requests of one connection are handled one at a time, in
order, as Kafka does; different connections run concurrently, so shared state needs locking.

Returns vs raises:
- a response object: sent to the client;
- None: nothing is sent. Only Produce with acks=0 may do this (the client waits for nothing);
  for any other API it is a handler bug and the connection is closed;
- a ``concurrent.futures.Future`` resolving to either of the above: a delayed answer (a Fetch
  waiting for data up to max_wait_ms) that holds no worker thread while it waits;
- ``CloseConnectionError``: nothing is sent and the connection is closed, the protocol's own answer
  in one case (an acks=0 Produce that failed: the client learns of it only by the close);
- any other exception: logged as a bug, and the connection is closed (clients reconnect and
  retry). Expected failures (unknown topic, invalid config, ...) are error codes inside the
  response, never exceptions.
ApiVersions is answered by the listener itself from its ApiVersionRegistry.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from kio.static.protocol import RequestHeader, RequestPayload, ResponsePayload

from tiered.kafka.messages import response_type_for
from tiered.net import PLAINTEXT
from tiered.security import principal as security

__all__ = [
    "CloseConnectionError",
    "HandlerResult",
    "KafkaHandler",
    "RequestContext",
    "response_type_for",
]

HandlerResult: TypeAlias = ResponsePayload | Future[ResponsePayload | None] | None


class CloseConnectionError(Exception):
    """Raised by a handler whose answer is closing the connection; the message says why (it is
    logged at INFO, without a traceback)."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked: the decoded request header, the client's address (``host:port``), the
    principal the listener authenticated (``User:ANONYMOUS`` on a listener that authenticates
    nobody) and the listener's name."""

    header: RequestHeader
    client_address: str
    principal: security.KafkaPrincipal = security.ANONYMOUS
    listener: str = PLAINTEXT

    @property
    def client_host(self) -> str:
        """The client's host, without the port (``[::1]:5`` -> ``::1``)."""
        host, _, _ = self.client_address.rpartition(":")
        return (host or self.client_address).strip("[]")

    @property
    def requester(self) -> security.RequestContext:
        """What the authorizer judges: principal, client host, listener."""
        return security.RequestContext(self.principal, self.client_host, self.listener)

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


class KafkaHandler(Protocol):
    """What the broker implements. A listener only calls the methods of the APIs its
    ApiVersionRegistry advertises, so a handler for a smaller registry may omit the rest."""

    def produce(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def fetch(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def list_offsets(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def metadata(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def find_coordinator(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...

    def join_group(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def heartbeat(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def leave_group(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def sync_group(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def describe_groups(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...

    def list_groups(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def offset_commit(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def offset_fetch(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def offset_delete(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def delete_groups(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def create_topics(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def delete_topics(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def create_partitions(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...
    def delete_records(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def init_producer_id(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...

    def describe_configs(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...

    def alter_configs(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def describe_log_dirs(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...

    def incremental_alter_configs(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...

    def describe_cluster(
        self, request: RequestPayload, context: RequestContext
    ) -> HandlerResult: ...

    def describe_acls(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def create_acls(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...

    def delete_acls(self, request: RequestPayload, context: RequestContext) -> HandlerResult: ...
