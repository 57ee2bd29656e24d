"""The request context of a gRPC call, for the servicers' authorization checks.

On a TLS listener the principal comes from the client's certificate (grpc's auth context carries
it as ``x509_pem_cert``), named as on the Kafka SSL listener: Java's RFC 2253 form through the
process's ``ssl.principal.mapping.rules`` (``use_principal_mapper``, once at start).
"""

from __future__ import annotations

import functools
import logging

import grpc
from cryptography import x509

from tiered.security.principal import ANONYMOUS, KafkaPrincipal, RequestContext
from tiered.security.ssl_principal import NoMatchingRuleError, SslPrincipalMapper

__all__ = ["GRPC_LISTENER", "grpc_request_context", "peer_host", "use_principal_mapper"]

log = logging.getLogger(__name__)

GRPC_LISTENER = "GRPC"
_PEM_CERTIFICATE = "x509_pem_cert"
_mapper = SslPrincipalMapper()


def use_principal_mapper(mapper: SslPrincipalMapper) -> None:
    """The process's ``ssl.principal.mapping.rules`` for gRPC callers (the daemons set it at
    start, from the properties their listener uses)."""
    global _mapper  # noqa: PLW0603 - one setting per process, as the listener is
    _mapper = mapper
    _principal_of_pem.cache_clear()


def peer_host(peer: str) -> str:
    """The host of grpc's ``context.peer()`` (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    _, _, address = peer.partition(":")
    host, _, _ = address.rpartition(":")
    return host.strip("[]") or address


def grpc_request_context(context: grpc.ServicerContext) -> RequestContext:
    """Who made this call: the principal of the client's certificate on a TLS listener,
    ANONYMOUS on a plaintext one (or for a name no mapping rule applies to)."""
    certificates = context.auth_context().get(_PEM_CERTIFICATE)
    principal = _principal_of_pem(certificates[0]) if certificates else ANONYMOUS
    return RequestContext(principal, peer_host(context.peer()), GRPC_LISTENER)


@functools.lru_cache(maxsize=256)  # the same few daemons and admins call again and again
def _principal_of_pem(pem: bytes) -> KafkaPrincipal:
    try:
        return _mapper.principal_of(x509.load_pem_x509_certificate(pem))
    except NoMatchingRuleError as e:
        log.info("gRPC caller is anonymous: %s", e)
        return ANONYMOUS
