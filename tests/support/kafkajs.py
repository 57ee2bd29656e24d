"""KafkaJS (npm ``kafkajs``, pinned in tests/js/package-lock.json and installed by
scripts/ensure_env.sh) against a cluster's Kafka listeners, through tests/js/kafkajs_client.js:
a list of steps (admin calls, an idempotent producer's sends) goes to one node process as JSON on
stdin, each step's result or error comes back as JSON on stdout. Bytes travel base64."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.cluster import Cluster
from tests.support.kafka_clients import Message
from tests.support.kafka_cluster import kafka_bootstrap

JS_DIR = Path(__file__).resolve().parents[1] / "js"
SCRIPT = JS_DIR / "kafkajs_client.js"
TIMEOUT_S = 90.0


@dataclass(frozen=True)
class Outcome:
    """One step's answer: KafkaJS's return value, or the error it threw (name, type, code,
    retriable, message; for alterConfigs also ``broker_answers``, the decoded AlterConfigs
    answers, since KafkaJS keeps only their error code)."""

    value: Any
    error: dict[str, Any] | None

    def ok(self) -> Any:
        assert self.error is None, f"KafkaJS failed: {self.error}"
        return self.value


def kafkajs(
    cluster: Cluster, *steps: dict[str, Any], timeout_s: float = TIMEOUT_S
) -> list[Outcome]:
    """Runs ``steps`` in order in one KafkaJS client (every step runs, whatever the ones
    before it did); the node process must finish within ``timeout_s``."""
    node = shutil.which("node")
    assert node is not None, "node is not installed: run scripts/ensure_env.sh"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), "run scripts/ensure_env.sh (npm ci)"
    request = {"brokers": kafka_bootstrap(cluster).split(","), "steps": list(steps)}
    done = subprocess.run(
        [node, str(SCRIPT)],
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"kafkajs_client.js exited {done.returncode}: {done.stderr!r}"
    results = json.loads(done.stdout)["results"]
    assert len(results) == len(steps), results
    return [Outcome(r.get("ok"), r.get("error")) for r in results]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def produce_step(
    topic: str, batches: list[list[Message]], compression: str = "none", idempotent: bool = True
) -> dict[str, Any]:
    """A producer (``idempotent``: maxInFlightRequests 1, acks -1) that sends each batch with
    one ``send`` (KafkaJS codecs: none, gzip). A header name may repeat only in a row: KafkaJS
    takes headers as an object, a repeated name as an array of its values."""
    return {
        "op": "produce",
        "topic": topic,
        "idempotent": idempotent,
        "compression": compression,
        "batches": [
            [
                {
                    "partition": m.partition,
                    "key": _b64(m.key),
                    "value": _b64(m.value),
                    "headers": [[name, _b64(value)] for name, value in m.headers],
                    "timestamp_ms": m.timestamp_ms,
                }
                for m in batch
            ]
            for batch in batches
        ],
    }


def config_values(described: Any) -> dict[str, str | None]:
    """Name -> value of a describeConfigs step's entries."""
    return {name: entry["value"] for name, entry in described["entries"].items()}
