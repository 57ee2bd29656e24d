"""The broker a Kafka API runs on, as its answers name it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tiered.net import Listener

__all__ = ["ThisBroker"]


@dataclass
class ThisBroker:
    """This broker's id, its Kafka listeners as clients reach them (advertised, in ``listeners``
    order; one whose port was 0 is set again once bound), its log directory and its static
    configs."""

    node_id: int
    endpoints: tuple[Listener, ...]
    log_dir: Path
    properties: Mapping[str, str] = field(default_factory=dict)

    def endpoint(self, listener: str) -> Listener:
        """The endpoint of the listener named ``listener`` (a request is answered with the
        endpoints of the listener it came in on, Kafka's rule); KeyError if there is none."""
        found = next((e for e in self.endpoints if e.name == listener), None)
        if found is None:
            raise KeyError(f"broker {self.node_id} has no Kafka listener {listener}")
        return found

    def bound_to(self, listener: str, port: int) -> None:
        """The listener named ``listener`` is bound: an advertised port 0 becomes ``port``."""
        self.endpoints = tuple(
            replace(e, port=port) if e.name == listener and e.port == 0 else e
            for e in self.endpoints
        )
