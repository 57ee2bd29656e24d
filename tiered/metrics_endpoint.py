"""The Prometheus endpoint both daemons serve (``metrics.port``): one HTTP server thread answering
``GET /metrics`` from a registry of its own, so that a test process running several daemons'
collectors never mixes them up in prometheus_client's global registry."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

PORT_KEY = "metrics.port"
HOST_KEY = "metrics.host"
DEFAULT_HOST = "127.0.0.1"
"""Loopback unless configured otherwise: the endpoint has no authentication, and its labels name
every topic."""


def metrics_host(values: Mapping[str, str]) -> str:
    """The address the endpoint binds (``metrics.host``; loopback when unset or empty)."""
    return values.get(HOST_KEY, "").strip() or DEFAULT_HOST


class MetricsEndpointError(Exception):
    """The endpoint could not listen where its configuration says: the message names the
    address and the key that chose it."""


class MetricsEndpoint:
    """A started endpoint: ``url`` is what Prometheus scrapes; ``close`` stops answering."""

    def __init__(self, host: str, port: int, collectors: list[Collector]) -> None:
        registry = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            registry.register(collector)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as e:  # in use, or not an address of this host
            raise MetricsEndpointError(
                f"cannot listen on {host}:{port} ({PORT_KEY}): {e.strerror or e}"
            ) from e
        self.host = host
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
