"""The broker a Kafka API runs on, as its answers name it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tiered.net import Listener

__all__ = ["ThisBroker"]


@dataclass
class ThisBroker:
    """This broker's id, its Kafka listener as clients reach it (advertised: set again once
    the listener is bound when its port was 0), its log directory and its static configs."""

    node_id: int
    endpoint: Listener
    log_dir: Path
    properties: Mapping[str, str] = field(default_factory=dict)

    def bound_to(self, port: int) -> None:
        """The listener is bound: an advertised port 0 becomes ``port``."""
        if self.endpoint.port == 0:
            self.endpoint = replace(self.endpoint, port=port)
