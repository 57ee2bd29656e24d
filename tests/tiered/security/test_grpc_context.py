"""The principal of a gRPC caller, over real TLS handshakes in the test process: the subject of
its certificate (as on the Kafka SSL listener), through the process's mapping rules;
ANONYMOUS on a plaintext listener; ``GrpcSecurity`` from Kafka's keys."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from cli.security.client_config import channel_credentials
from tests.support.certs import ADMIN_DN, ClusterCertificates
from tiered.net import bind_grpc_port
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.security.grpc_context import grpc_request_context, use_principal_mapper
from tiered.security.grpc_tls import GrpcSecurity
from tiered.security.principal import ANONYMOUS, KafkaPrincipal, RequestContext
from tiered.security.ssl_principal import SslPrincipalMapper


class Recording(pb_grpc.AdminServiceServicer):
    def __init__(self) -> None:
        self.seen: list[RequestContext] = []

    def DescribeCluster(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.seen.append(grpc_request_context(context))
        return pb.DescribeClusterResponse()


def _serve(credentials: grpc.ServerCredentials | None) -> tuple[grpc.Server, Recording, str]:
    server = grpc.server(ThreadPoolExecutor(2))
    servicer = Recording()
    pb_grpc.add_AdminServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    if credentials is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    return server, servicer, f"127.0.0.1:{port}"


def _call(address: str, credentials: grpc.ChannelCredentials | None) -> None:
    channel = (
        grpc.insecure_channel(address)
        if credentials is None
        else grpc.secure_channel(address, credentials)
    )
    with channel:
        pb_grpc.AdminServiceStub(channel).DescribeCluster(  # type: ignore[no-untyped-call]
            pb.DescribeClusterRequest(), timeout=10
        )


@pytest.fixture
def security(certificates: ClusterCertificates) -> GrpcSecurity:
    return GrpcSecurity.from_properties(
        {
            "listener.security.protocol.map": "GRPC:SSL",
            **certificates.server_properties(certificates.controller),
        }
    )


@pytest.fixture(autouse=True)
def _default_rules() -> Iterator[None]:
    yield
    use_principal_mapper(SslPrincipalMapper())


def test_the_principal_is_the_certificates_subject_then_mapped(
    certificates: ClusterCertificates, security: GrpcSecurity
) -> None:
    assert security.tls
    server, servicer, address = _serve(security.server_credentials)
    admin = channel_credentials(certificates.client_properties(certificates.admin))
    try:
        _call(address, admin)
        use_principal_mapper(SslPrincipalMapper("RULE:^CN=([^,]*),.*$/$1/"))
        _call(address, admin)
        use_principal_mapper(SslPrincipalMapper("RULE:^CN=nobody.*$/x/"))  # no rule applies
        _call(address, admin)
    finally:
        server.stop(0)
    assert [c.principal for c in servicer.seen] == [
        KafkaPrincipal("User", ADMIN_DN),
        KafkaPrincipal("User", "admin"),
        ANONYMOUS,
    ]
    assert {(c.client_host, c.listener) for c in servicer.seen} == {("127.0.0.1", "GRPC")}


def test_a_plaintext_listener_knows_nobody() -> None:
    server, servicer, address = _serve(None)
    try:
        _call(address, None)
    finally:
        server.stop(0)
    assert [c.principal for c in servicer.seen] == [ANONYMOUS]


def test_the_grpc_listener_requires_a_certificate_by_default(
    certificates: ClusterCertificates, security: GrpcSecurity
) -> None:
    server = grpc.server(ThreadPoolExecutor(1))
    assert bind_grpc_port(server, "127.0.0.1:0", security.server_credentials)
    server.stop(0)
    server, servicer, address = _serve(security.server_credentials)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            _call(address, channel_credentials(certificates.client_properties(None)))
    finally:
        server.stop(0)
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    assert servicer.seen == []


@pytest.mark.parametrize(
    ("values", "fragments"),
    [
        ({"listener.security.protocol.map": "GRPC:SASL_SSL"}, ["GRPC:PLAINTEXT, GRPC:SSL"]),
        ({"listener.security.protocol.map": "GRPC"}, ["NAME:PROTOCOL"]),
        ({"listener.security.protocol.map": "SSL:PLAINTEXT"}, ["only GRPC is mapped"]),
        ({"listener.security.protocol.map": "GRPC:SSL"}, ["needs ssl.keystore.location"]),
        (
            {"listener.security.protocol.map": "GRPC:SSL", "ssl.client.auth": "requested"},
            ["ssl.client.auth=requested", "valid values: required, none"],
        ),
    ],
)
def test_bad_grpc_security_names_the_key(values: dict[str, str], fragments: list[str]) -> None:
    with pytest.raises(ValueError) as refused:
        GrpcSecurity.from_properties(values)
    assert all(f in str(refused.value) for f in fragments), refused.value
    assert not GrpcSecurity.from_properties({}).tls
