"""kcat (Debian's ``kcat``, installed by scripts/ensure_env.sh), librdkafka's command-line
producer and consumer, run against a cluster's Kafka listeners: produce lines of ``key<TAB>value``
with headers and a codec, consume partitions by assignment (no consumer group) into ``Message``s
byte for byte, and list metadata as JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from typing import Any

from tests.support.cluster import Cluster
from tests.support.kafka_clients import Message
from tests.support.kafka_cluster import kafka_bootstrap

TIMEOUT_S = 60.0
# A header line of numbers and the headers (kcat's "n=v,..." CSV, each value cut at a NUL byte),
# then the key and the value, whose lengths the header line gives (-1: null), then a newline.
FORMAT = r"%p %o %T %K %S %h\n%k%s\n"


def kcat_sample(count: int, tag: str = "") -> list[tuple[bytes | None, bytes]]:
    """(key, value) lines for ``kcat_produce``: null keys, empty keys, empty values, and values
    of every byte but tab and newline, padded so that every codec shrinks them (librdkafka sends
    a batch that compression would not make smaller uncompressed)."""
    binary = bytes(b for b in range(256) if b not in b"\t\n")
    records: list[tuple[bytes | None, bytes]] = []
    for i in range(count):
        key = None if i % 4 == 0 else b"" if i % 4 == 1 else f"key-{i}".encode()
        value = b"" if i % 5 == 2 else f"{tag}{i:04d}".encode() + binary[i % 7 :: 7] + b"." * 60
        records.append((key, value))
    return records


def kcat(cluster: Cluster, *args: str, stdin: bytes = b"", timeout_s: float = TIMEOUT_S) -> bytes:
    """kcat's stdout for ``args`` against every broker; it must exit 0 within ``timeout_s``."""
    binary = shutil.which("kcat")
    assert binary is not None, "kcat is not installed: run scripts/ensure_env.sh"
    done = subprocess.run(
        [binary, "-b", kafka_bootstrap(cluster), "-q", "-m", "30", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr!r}"
    return done.stdout


def kcat_produce(
    cluster: Cluster,
    topic: str,
    partition: int,
    records: list[tuple[bytes | None, bytes]],
    headers: tuple[tuple[str, str], ...] = (),
    codec: str = "none",
) -> None:
    """Produces ``records`` (key or None, value) in order to ``partition``, every one with
    ``headers``, compressed with ``codec``; kcat waits for every delivery."""
    lines = []
    for key, value in records:
        assert b"\n" not in value and b"\t" not in value and b"\n" not in (key or b"")
        lines.append(value if key is None else key + b"\t" + value)  # no tab: a null key
    options = [arg for name, value in headers for arg in ("-H", f"{name}={value}")]
    kcat(
        cluster,
        "-P",
        "-t",
        topic,
        "-p",
        str(partition),
        "-K",
        r"\t",
        "-z",
        codec,
        *options,
        stdin=b"".join(line + b"\n" for line in lines),
    )


def kcat_consume(
    cluster: Cluster, topic: str, partition: int | None = None, offset: str = "beginning"
) -> list[Message]:
    """Every message of ``topic`` (of one ``partition``, or all of them) from ``offset`` to the
    end as it was when kcat started; each partition assigned, not subscribed."""
    only = ["-p", str(partition)] if partition is not None else []
    # A short long poll: the end (-e) is seen when a fetch comes back empty.
    wait = ("-X", "fetch.wait.max.ms=50")
    out = kcat(cluster, "-C", "-t", topic, *only, "-o", offset, "-e", *wait, "-f", FORMAT)
    return parse(out)


def parse(out: bytes) -> list[Message]:
    """The ``Message``s in kcat's output in ``FORMAT``."""
    messages = []
    at = 0
    while at < len(out):
        end = out.index(b"\n", at)
        *numbers, header_csv = out[at:end].split(b" ", 5)
        partition, offset, timestamp, key_size, value_size = (int(n) for n in numbers)
        headers = _headers(header_csv)
        at = end + 1
        key, at = _take(out, at, key_size)
        value, at = _take(out, at, value_size)
        assert out[at : at + 1] == b"\n", out[at - 20 : at + 20]
        at += 1
        messages.append(Message(partition, key, value, headers, timestamp, offset))
    return messages


def as_printed(messages: list[Message]) -> list[Message]:
    """``messages`` as kcat's ``%h`` prints them: a header value ends at its first NUL byte."""
    return [
        replace(m, headers=tuple((n, v.split(b"\0")[0]) for n, v in m.headers)) for m in messages
    ]


def _take(out: bytes, at: int, size: int) -> tuple[bytes | None, int]:
    if size < 0:
        return None, at
    return out[at : at + size], at + size


def _headers(csv: bytes) -> tuple[tuple[str, bytes], ...]:
    """kcat's ``n=v,n=v``: names and values must hold no ``,`` (nor a name ``=``)."""
    if not csv:
        return ()
    pairs = [item.partition(b"=") for item in csv.split(b",")]
    return tuple((name.decode(), value) for name, _, value in pairs)


def kcat_metadata(cluster: Cluster, topic: str | None = None) -> Any:
    """``kcat -L -J``: brokers, controller and topics (one, or all) as kcat lists them."""
    only = ["-t", topic] if topic is not None else []
    return json.loads(kcat(cluster, "-L", "-J", *only))
