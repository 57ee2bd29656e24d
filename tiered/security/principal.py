"""Kafka's principals and the request context an authorizer judges.

A principal is ``Type:Name`` (Kafka's ``KafkaPrincipal``): ``User:CN=broker-1,O=tiered`` from a
client certificate, ``User:alice`` from a SCRAM login, ``User:ANONYMOUS`` on a listener that
authenticates nobody (PLAINTEXT, or gRPC without TLS).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "USER_TYPE", "KafkaPrincipal", "RequestContext"]

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:Name`` as ACLs and ``super.users`` spell it; ValueError names the form."""
        principal_type, sep, name = text.strip().partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"a principal is Type:Name (e.g. User:alice), got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who asked and from where (Kafka's ``AuthorizableRequestContext``): the authenticated
    principal, the client's host (an IP address, no port) and the listener's name."""

    principal: KafkaPrincipal
    client_host: str
    listener: str
