"""A fault-injecting HTTP proxy in front of an S3 endpoint (moto's server), for tests and bench/.

Clients point ``remote.storage.s3.endpoint.url`` at :attr:`S3FaultProxy.url`. Each request is
classified by S3 operation (``PutObject``, ``GetObject``, ``DeleteObjects``, ``ListObjectsV2``...)
and, if the :class:`FaultPlan` covers that operation, may get, each at its own rate:

- ``latency_s`` added before it is forwarded;
- a 503 ``SlowDown`` or a 500 ``InternalError`` answer with S3's XML error body, instead of being
  forwarded (the request has no effect);
- a connection reset (TCP RST, no answer) *after* being forwarded: the request took effect and
  the client cannot know, as when a connection breaks under a real store;
- for ``DeleteObjects``, per-key errors: some keys are taken out of the forwarded request (they
  stay stored) and answered as errors in the result (``SlowDown`` unless the plan names another
  code), as S3 does per key;
- for listings (``ListObjectsV2``), a page size (``max-keys``) forced on the request, so that a
  few objects take several pages.

Decisions come from one ``random.Random(seed)``, unless a test queued exact faults for the next
covered requests (:meth:`S3FaultProxy.inject_next`). The plan can be replaced while the proxy runs
(:meth:`S3FaultProxy.set_plan`), e.g. to turn faults on mid-run. The proxy counts what it saw and
injected (:attr:`S3FaultProxy.requests`, :attr:`S3FaultProxy.injected`), records every
DeleteObjects request (:attr:`S3FaultProxy.delete_requests`), the requests the endpoint answered
(:attr:`S3FaultProxy.forwarded`) and the access key ids that signed requests
(:attr:`S3FaultProxy.access_key_ids`).

It runs in threads of the calling process, one per client connection (HTTP/1.1 keep-alive), so it
serves as many concurrent connections as thread pools and Spark executors open.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import dataclasses
import hashlib
import http.client
import random
import re
import socket
import struct
import threading
import time
import uuid
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit
from xml.sax.saxutils import escape

__all__ = ["DeleteObjectsRequest", "FaultPlan", "S3FaultProxy"]

S3_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
)
_ERROR_MESSAGES = {
    "SlowDown": (503, "Please reduce your request rate."),
    "InternalError": (500, "We encountered an internal error. Please try again."),
    "AccessDenied": (403, "Access Denied"),
}


@dataclass(frozen=True)
class FaultPlan:
    """Fault rates (0 to 1) per request of the covered ``operations`` (None: every one)."""

    slow_down_rate: float = 0.0
    internal_error_rate: float = 0.0
    reset_rate: float = 0.0
    latency_s: float = 0.0
    delete_key_error_rate: float = 0.0
    delete_key_error_code: str = "SlowDown"
    list_page_size: int | None = None
    operations: frozenset[str] | None = None

    def __post_init__(self) -> None:
        rates = (self.slow_down_rate, self.internal_error_rate, self.reset_rate)
        if not all(0 <= r <= 1 for r in (*rates, self.delete_key_error_rate)) or sum(rates) > 1:
            raise ValueError(f"rates must be in [0, 1] and the request faults sum to <= 1: {self}")
        if self.latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, not {self.latency_s}")

    def covers(self, operation: str) -> bool:
        return self.operations is None or operation in self.operations


@dataclass(frozen=True)
class DeleteObjectsRequest:
    """One DeleteObjects request as the proxy received it, and what it did to it."""

    keys: tuple[str, ...]
    fault: str | None  # "SlowDown", "InternalError", "reset" or None
    failed_keys: tuple[str, ...] = ()  # answered with a per-key error


def operation_of(method: str, target: str) -> str:
    """The S3 operation of a path-style request (``/bucket/key?query``)."""
    parts = urlsplit(target)
    path = parts.path.lstrip("/")
    query = parse_qs(parts.query, keep_blank_values=True)
    bucket, _, key = path.partition("/")
    if not bucket:
        return "ListBuckets"
    if not key:
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        if method == "GET":
            return "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
        return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}.get(
            method, f"{method}Bucket"
        )
    if method == "PUT":
        return "UploadPart" if "partNumber" in query else "PutObject"
    if method == "POST":
        return "CompleteMultipartUpload" if "uploadId" in query else "CreateMultipartUpload"
    return {"GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(
        method, f"{method}Object"
    )


def error_body(code: str, resource: str) -> bytes:
    message = _ERROR_MESSAGES[code][1]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{escape(resource)}</Resource><RequestId>{uuid.uuid4().hex}</RequestId></Error>"
    ).encode()


class S3FaultProxy:
    """See the module docstring. ``upstream``: ``http://host:port`` of the real endpoint."""

    def __init__(self, upstream: str, *, seed: int = 0, plan: FaultPlan | None = None) -> None:
        parts = urlsplit(upstream)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://HOST:PORT, not {upstream!r}")
        self.upstream = (parts.hostname, parts.port)
        self._plan = plan or FaultPlan()
        self._seed = seed
        self._random = random.Random(seed)
        self._queued: collections.deque[str] = collections.deque()
        self._lock = threading.Lock()
        self.requests: collections.Counter[str] = collections.Counter()
        # Requests the endpoint has answered, by operation: with ``requests``, whether every
        # request delayed by ``latency_s`` has landed.
        self.forwarded: collections.Counter[str] = collections.Counter()
        self.injected: collections.Counter[str] = collections.Counter()
        self.delete_requests: list[DeleteObjectsRequest] = []
        self.access_key_ids: collections.Counter[str] = collections.Counter()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3-fault-proxy", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def plan(self) -> FaultPlan:
        return self._plan

    def set_plan(self, plan: FaultPlan | None = None, **changes: object) -> None:
        """Replaces the plan (``plan``, or the current one with ``changes``); requests that
        arrive from now on follow it."""
        new = plan or self._plan
        if changes:
            new = dataclasses.replace(new, **changes)  # type: ignore[arg-type]
        with self._lock:
            self._plan = new

    def inject_next(self, *faults: str) -> None:
        """The next covered requests get these faults (``SlowDown``, ``InternalError``,
        ``reset`` or ``none``), one each, before the rates apply again."""
        unknown = set(faults) - {"SlowDown", "InternalError", "reset", "none"}
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}")
        with self._lock:
            self._queued.extend(faults)

    def reseed(self) -> None:
        """Draws from the start of the seed's sequence again: a test's faults then do not
        depend on how many requests the tests before it made."""
        with self._lock:
            self._random.seed(self._seed)

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.forwarded.clear()
            self.injected.clear()
            self.delete_requests.clear()
            self.access_key_ids.clear()
            self._queued.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- decisions (under the lock: one random sequence) -------------------------------------

    def _decide(self, operation: str, authorization: str) -> tuple[FaultPlan, str | None]:
        with self._lock:
            plan = self._plan
            self.requests[operation] += 1
            found = _CREDENTIAL.search(authorization)
            if found:
                self.access_key_ids[found.group(1)] += 1
            if not plan.covers(operation):
                return plan, None
            fault: str | None = None
            if self._queued:
                queued = self._queued.popleft()
                fault = None if queued == "none" else queued
                if fault is not None:
                    self.injected[fault] += 1
                return plan, fault
            draw = self._random.random()
            for name, rate in (
                ("SlowDown", plan.slow_down_rate),
                ("InternalError", plan.internal_error_rate),
                ("reset", plan.reset_rate),
            ):
                if draw < rate:
                    fault = name
                    break
                draw -= rate
            if fault is not None:
                self.injected[fault] += 1
            return plan, fault

    def _pick_failed_keys(self, plan: FaultPlan, keys: list[str]) -> list[str]:
        if plan.delete_key_error_rate <= 0:
            return []
        with self._lock:
            failed = [k for k in keys if self._random.random() < plan.delete_key_error_rate]
            self.injected[f"key {plan.delete_key_error_code}"] += len(failed)
            return failed

    def _record_delete(self, request: DeleteObjectsRequest) -> None:
        with self._lock:
            self.delete_requests.append(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    proxy: S3FaultProxy

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that went away mid-request (or a reset we made) is not news


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer is two writes (headers, then body): without TCP_NODELAY the client's delayed
    # ACK holds the body about 40 ms, which would cost every proxied request as much.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    def do_HEAD(self) -> None:
        self._proxy()

    def do_PUT(self) -> None:
        self._proxy()

    def do_POST(self) -> None:
        self._proxy()

    def do_DELETE(self) -> None:
        self._proxy()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _proxy(self) -> None:
        proxy = self.server.proxy
        body = self._read_body()
        operation = operation_of(self.command, self.path)
        plan, fault = proxy._decide(operation, self.headers.get("Authorization", ""))
        if plan.covers(operation) and plan.latency_s > 0:
            time.sleep(plan.latency_s)  # the injected latency itself
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        target = self.path
        if operation == "ListObjectsV2" and plan.list_page_size and plan.covers(operation):
            target = _with_page_size(target, plan.list_page_size)
        failed_keys: list[str] = []
        delete_keys: list[str] = []
        if operation == "DeleteObjects":
            delete_keys = _delete_keys(body)
            if fault is None and plan.covers(operation):
                failed_keys = proxy._pick_failed_keys(plan, delete_keys)
            proxy._record_delete(
                DeleteObjectsRequest(tuple(delete_keys), fault, tuple(failed_keys))
            )
        if fault in _ERROR_MESSAGES:
            status, _ = _ERROR_MESSAGES[fault]
            self._answer(status, {"Content-Type": "application/xml"}, error_body(fault, self.path))
            return
        if failed_keys and len(failed_keys) == len(delete_keys):
            status, answer_headers = 200, {"Content-Type": "application/xml"}
            answer = _with_key_errors(_empty_delete_result(), failed_keys, plan)
        else:
            if failed_keys:
                body = _without_keys(body, set(failed_keys))
                _fix_checksums(headers, body)
            status, answer_headers, answer = self._forward(target, headers, body)
            with proxy._lock:
                proxy.forwarded[operation] += 1
            if failed_keys:
                answer = _with_key_errors(answer, failed_keys, plan)
        if fault == "reset":
            self._reset()
            return
        self._answer(status, answer_headers, answer)

    def _forward(
        self, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(*self.server.proxy.upstream, timeout=60)
        try:
            headers["Content-Length"] = str(len(body))
            connection.request(self.command, target, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}
            if self.command == "HEAD":
                # No body, but the object's size as the endpoint gave it.
                length = response.getheader("Content-Length")
                if length is not None:
                    kept["Content-Length"] = length
            return response.status, kept, answer
        finally:
            connection.close()

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response_only(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Length" not in headers or self.command != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def _reset(self) -> None:
        """Closes the client connection with a TCP RST instead of an answer."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def finish(self) -> None:
        with contextlib.suppress(OSError):  # the connection was reset on purpose
            super().finish()


def _with_page_size(target: str, page_size: int) -> str:
    """The request target with ``max-keys`` set (moto does not check signatures)."""
    parts = urlsplit(target)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "max-keys"]
    return parts._replace(query=urlencode([*query, ("max-keys", str(page_size))])).geturl()


def _delete_keys(body: bytes) -> list[str]:
    root = ET.fromstring(body)
    return [
        (key.text or "")
        for obj in root
        if obj.tag.rsplit("}", 1)[-1] == "Object"
        for key in obj
        if key.tag.rsplit("}", 1)[-1] == "Key"
    ]


def _without_keys(body: bytes, drop: set[str]) -> bytes:
    root = ET.fromstring(body)
    for obj in list(root):
        if obj.tag.rsplit("}", 1)[-1] != "Object":
            continue
        key = next((k.text for k in obj if k.tag.rsplit("}", 1)[-1] == "Key"), None)
        if key in drop:
            root.remove(obj)
    ET.register_namespace("", S3_NAMESPACE)
    return ET.tostring(root, xml_declaration=True, encoding="UTF-8")


def _fix_checksums(headers: dict[str, str], body: bytes) -> None:
    """The checksums of a rewritten request body (the endpoint may verify them)."""
    for name in list(headers):
        lower = name.lower()
        if lower == "content-md5":
            headers[name] = base64.b64encode(hashlib.md5(body).digest()).decode()
        elif lower == "x-amz-checksum-crc32":
            crc = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
            headers[name] = base64.b64encode(crc).decode()
        elif lower.startswith("x-amz-checksum-") or lower == "x-amz-sdk-checksum-algorithm":
            del headers[name]


def _empty_delete_result() -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="{S3_NAMESPACE}"/>'.encode()


def _with_key_errors(answer: bytes, keys: list[str], plan: FaultPlan) -> bytes:
    root = ET.fromstring(answer)
    namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    for key in keys:
        error = ET.SubElement(root, f"{namespace}Error")
        for name, text in (
            ("Key", key),
            ("Code", plan.delete_key_error_code),
            ("Message", _ERROR_MESSAGES.get(plan.delete_key_error_code, ("", "injected"))[1]),
        ):
            ET.SubElement(error, f"{namespace}{name}").text = text
    ET.register_namespace("", S3_NAMESPACE)
    return ET.tostring(root, xml_declaration=True, encoding="UTF-8")
