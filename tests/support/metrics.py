"""Reading the controller's Prometheus figures in tests: from its collectors in process, or from
its endpoint over HTTP, as ``{(sample name, labels): value}``."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

from tests.support.processes import DaemonProcess

CONTROLLER = "kafka_controller_kafkacontroller_"
CHANNEL = "kafka_controller_controllerchannelmanager_"
BULK_DELETE = "kafka_controller_bulkdelete_"
REQUESTS = "kafka_network_requestmetrics_"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def collect(*collectors: Collector) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in registry.collect()
        for sample in family.samples
    }


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def figure(samples: Samples, name: str, **labels: str) -> float | None:
    """A sample's value, None when the endpoint has no such sample."""
    return samples.get((name, frozenset(labels.items())))


def metrics_url(process: DaemonProcess) -> str:
    """The endpoint a daemon started with ``metrics.port`` announced."""
    line = process.wait_for_line("metrics on")
    found = re.search(r"metrics on (http://\S+/metrics)", line)
    assert found, line
    return found.group(1)
