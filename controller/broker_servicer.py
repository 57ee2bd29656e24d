"""The controller's ControllerService: the brokers' calls (RegisterBroker, BrokerHeartbeat, and
in KRaft mode FetchMetadata). Thin: convert protobuf at the edge, call the ``BrokerRegistry`` or
read the metadata log, map errors in ``tiered.rpc.status``."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import grpc

from controller.acl_servicer import CLUSTER
from controller.broker_registry import BrokerRegistry
from controller.leadership import Term
from controller.store import MetadataStore, MetadataStoreError
from controller.store.base import MetadataLogSource
from tiered.cluster.serde import broker_registration_from_proto
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.status import error_to_proto, handle
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.security.access import AccessControl
from tiered.security.acl import CLUSTER_NAME, AclOperation
from tiered.security.grpc_context import grpc_request_context

__all__ = ["ControllerServicer"]


class ControllerServicer(pb_grpc.ControllerServiceServicer):
    """Brokers' calls: each needs ClusterAction on the cluster, of the caller itself."""

    def __init__(
        self,
        brokers: BrokerRegistry,
        term: Term,
        store: MetadataStore,
        stopping: threading.Event,
        access: AccessControl,
    ) -> None:
        self._brokers = brokers
        self._term = term
        self._store = store
        self._stopping = stopping
        self._access = access

    def _require_cluster_action(self, context: grpc.ServicerContext) -> None:
        self._access.require(
            grpc_request_context(context), AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME
        )

    def RegisterBroker(
        self, request: pb.RegisterBrokerRequest, context: grpc.ServicerContext
    ) -> pb.RegisterBrokerResponse:
        def call() -> pb.RegisterBrokerResponse:
            self._require_cluster_action(context)
            epoch = self._brokers.register(broker_registration_from_proto(request.registration))
            return pb.RegisterBrokerResponse(error=error_to_proto(None), controller_epoch=epoch)

        return handle(context, call, lambda e: pb.RegisterBrokerResponse(error=error_to_proto(e)))

    def BrokerHeartbeat(
        self, request: pb.BrokerHeartbeatRequest, context: grpc.ServicerContext
    ) -> pb.BrokerHeartbeatResponse:
        def call() -> pb.BrokerHeartbeatResponse:
            self._require_cluster_action(context)
            epoch = self._brokers.heartbeat(
                request.broker_id, uuid.UUID(bytes=request.incarnation_id)
            )
            return pb.BrokerHeartbeatResponse(error=error_to_proto(None), controller_epoch=epoch)

        return handle(context, call, lambda e: pb.BrokerHeartbeatResponse(error=error_to_proto(e)))

    def FetchMetadata(
        self, request: pb.FetchMetadataRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.FetchMetadataResponse]:
        """KRaft mode: the metadata log from ``from_offset`` on, then new batches as they are
        written, until the broker goes away or this controller stops being active."""
        store = self._store
        denied: pb.FetchMetadataResponse | None = handle(
            context, lambda: self._require_cluster_action(context), _fetch_refused
        )
        if denied is not None:
            yield denied
            return
        if not isinstance(store, MetadataLogSource):
            yield pb.FetchMetadataResponse(
                error=error_to_proto(
                    TieredError(
                        ErrorCode.INVALID_REQUEST,
                        f"FetchMetadata needs metadata.store=kraft, not {store.mode}",
                    )
                )
            )
            return
        offset = request.from_offset
        while context.is_active() and not self._stopping.is_set():
            if self._term.active_epoch is None:
                yield pb.FetchMetadataResponse(
                    error=error_to_proto(
                        TieredError(ErrorCode.NOT_CONTROLLER, "this controller is not active")
                    )
                )
                return
            try:
                batches, is_snapshot = store.read_batches(offset, 1.0)
            except MetadataStoreError as e:  # resigned while the broker waited
                yield pb.FetchMetadataResponse(
                    error=error_to_proto(TieredError(ErrorCode.NOT_CONTROLLER, str(e)))
                )
                return
            for batch in batches:
                # A snapshot is the image as of its base_offset (the last record it includes).
                offset = batch.base_offset + (1 if is_snapshot else len(batch.records))
                yield pb.FetchMetadataResponse(
                    batch=batch,
                    is_snapshot=is_snapshot,
                    next_offset=offset,
                    error=error_to_proto(None),
                )


def _fetch_refused(error: TieredError) -> pb.FetchMetadataResponse:
    return pb.FetchMetadataResponse(error=error_to_proto(error))
