"""What every ZooKeeper client of the project shares (the controller store, the brokers'
registration, the RLMM backend): the connect string, the transport errors, a kazoo client whose
every request waits at most the session timeout, and the reading of a failed transaction.

Every znode is created with the ACL ``tiered.security.zookeeper_acl.znode_acl`` gives its path
(kazoo's ``create``, ``ensure_path`` and transactions alike), the client authenticates with the
digest credentials of its ``ZooKeeperSecurity``, over TLS when it says so (``zookeeper.ssl.*``),
and its connections come from the process's
``source.address`` (``tiered.source_address``) when it has one.

kazoo notes: a request made while disconnected is queued until the connection is back, however
long, so ``ZkClient.wait`` gives up after the session timeout; a failed transaction returns a
list with an exception per op instead of raising. The chroot of the connect string is handled
here rather than by kazoo, so that a missing chroot can be created.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    AuthFailedError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.handlers.utils import create_tcp_connection
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import ACL

from tiered import source_address
from tiered.retry import RetryPolicy
from tiered.retry_policies import zookeeper_connection_retry
from tiered.security.zookeeper_acl import (
    ZooKeeperAuthenticationError,
    check_may_change,
    znode_acl,
)
from tiered.security.zookeeper_auth import (
    JAAS_CONFIG_FILE_KEY,
    NO_SECURITY,
    ZooKeeperSecurity,
)

__all__ = [
    "TRANSPORT_ERRORS",
    "ZkClient",
    "connection_retry",
    "first_failure",
    "kazoo_retry",
    "split_connect_string",
]

# ZooKeeper did not answer (in time) or refused the request: each contract wraps these in its own
# error type (the controller store's ``MetadataStoreError``, the RLMM backend's
# ``StorageBackendError``).
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (KazooException, KazooTimeoutError)


def split_connect_string(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/chroot/x"`` -> ``("h1:2181,h2:2181", "/chroot/x")``; chroot may be ""."""
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"ZooKeeper connect string {connect!r} names no host")
    return hosts, ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""


def kazoo_retry(policy: RetryPolicy) -> KazooRetry:
    """``policy`` as kazoo's own retry object, which its connection loop takes and nothing else:
    the one place where a ``RetryPolicy`` becomes a ``KazooRetry``. kazoo applies the jitter
    fraction both ways around each delay (ours only shortens it) and grows the delay from the
    jittered one; tries, deadline, delays, cap and sleep carry over as they are."""
    return KazooRetry(
        max_tries=-1 if policy.max_tries is None else policy.max_tries,
        delay=policy.delay_s,
        backoff=policy.backoff,
        max_jitter=policy.jitter,
        max_delay=policy.max_delay_s,
        deadline=policy.deadline_s,
        sleep_func=policy.sleep,
    )


def connection_retry(session_timeout_s: float) -> KazooRetry:
    """What every ZooKeeper client of the project gives kazoo as ``connection_retry``."""
    return kazoo_retry(zookeeper_connection_retry(session_timeout_s))


def first_failure(results: Sequence[Any]) -> tuple[int, Exception] | None:
    """The op that failed a transaction, None if it committed: kazoo reports that op with its own
    exception, the ops before it with RolledBackError and the ops after it with
    RuntimeInconsistency."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            return index, result
    return None


class _SourceBoundSocketModule:
    """The ``socket`` module as kazoo's ``create_tcp_connection`` uses it, except that the
    sockets it makes come from the process's source address: kazoo has no option for it, and
    its connection code takes the module as an argument."""

    def __getattr__(self, name: str) -> Any:
        return getattr(socket, name)

    @staticmethod
    def create_connection(address: tuple[str, int], timeout: float | None = None) -> socket.socket:
        return source_address.connect(address, timeout)

    @staticmethod
    def socket(
        family: int = socket.AF_INET, type_: int = socket.SOCK_STREAM, proto: int = 0
    ) -> socket.socket:
        return source_address.bound_socket(family, type_, proto)


class _SourceBoundHandler(SequentialThreadingHandler):  # type: ignore[misc] # kazoo is untyped
    """kazoo's threading handler whose connections to ZooKeeper come from the process's source
    address (its plain and TLS connections alike)."""

    def create_connection(self, *args: Any, **kwargs: Any) -> socket.socket:
        connection: socket.socket = create_tcp_connection(
            _SourceBoundSocketModule(), *args, **kwargs
        )
        return connection


class _ClusterKazooClient(KazooClient):  # type: ignore[misc] # kazoo is untyped
    """A KazooClient that creates every znode with the ACL its path calls for: kazoo's
    ``default_acl`` is one ACL for every path, and a sensitive znode needs another."""

    def __init__(self, acl_for: Callable[[str], list[ACL] | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.acl_for = acl_for

    def create_async(self, path: str, value: bytes = b"", acl: Any = None, **kwargs: Any) -> Any:
        # kazoo's create, ensure_path and their sync forms all end here.
        return super().create_async(
            path, value, self.acl_for(path) if acl is None else acl, **kwargs
        )

    def transaction(self) -> TransactionRequest:
        return _ClusterTransaction(self)


class _ClusterTransaction(TransactionRequest):  # type: ignore[misc] # kazoo is untyped
    def create(self, path: str, value: bytes = b"", acl: Any = None, **kwargs: Any) -> None:
        super().create(path, value, self.client.acl_for(path) if acl is None else acl, **kwargs)


class ZkClient:
    """A kazoo client for ``connect`` (``host:port[,host:port...][/chroot]``), not started,
    authenticated and creating znodes as ``security`` says.

    Paths given to its methods are full paths: ``path()`` puts the chroot in front of a path of
    the layout. Every wait is bounded by the session timeout (then ``KazooTimeoutError``); the
    methods raise kazoo's errors (``TRANSPORT_ERRORS``), which their callers wrap.
    """

    def __init__(
        self, connect: str, session_timeout_s: float, security: ZooKeeperSecurity = NO_SECURITY
    ) -> None:
        hosts, self.chroot = split_connect_string(connect)
        self.connect = connect
        self.op_timeout_s = session_timeout_s
        self.security = security
        self.kazoo = _ClusterKazooClient(
            self.acl_for,
            hosts=hosts,
            timeout=session_timeout_s,
            connection_retry=connection_retry(session_timeout_s),
            auth_data=security.auth_data(),
            handler=_SourceBoundHandler(),
            **security.kazoo_tls_options(),
        )

    def __repr__(self) -> str:
        return f"ZkClient({self.connect!r})"

    def start(self, timeout_s: float, *parents: str) -> None:
        """Connects, then creates the chroot and ``parents`` (paths of the layout) where missing
        and checks that this process may change them (``ZooKeeperAuthenticationError`` if
        their ACLs grant another identity only); releases the client if any of it fails."""
        try:
            try:
                self.kazoo.start(timeout=timeout_s)
            except AuthFailedError:
                raise ZooKeeperAuthenticationError(
                    f"ZooKeeper authentication failed: the server refused the credentials of "
                    f"{JAAS_CONFIG_FILE_KEY}"
                ) from None
            owned = [self.chroot] if self.chroot else []
            owned += [self.path(parent) for parent in parents]
            for path in owned:
                self.ensure_path(path)
                self.check_may_change(path)
        except BaseException:
            self.close()
            raise

    def acl_for(self, path: str) -> list[ACL] | None:
        """The ACL to create the znode at ``path`` (a full path) with."""
        chroot = self.chroot
        if chroot and path != chroot and not path.startswith(chroot + "/"):
            return znode_acl("/", self.security.set_acl)  # an ancestor of the chroot
        return znode_acl(path[len(chroot) :] or "/", self.security.set_acl)

    def check_may_change(self, path: str) -> None:
        """Raises ``ZooKeeperAuthenticationError`` if the existing znode ``path`` may be changed
        only by identities other than this client's."""
        try:
            acls, _ = self.wait(self.kazoo.get_acls_async(path))
        except NoAuthError:
            acls = None
        except NoNodeError:
            return
        check_may_change(path, acls, self.security)

    def close(self) -> None:
        """Ends the session (its ephemeral znodes go with it) and releases the client."""
        try:
            self.kazoo.stop()
        finally:
            self.kazoo.close()

    def path(self, relative: str) -> str:
        return self.chroot + relative

    def session_id(self) -> int | None:
        """The current session, None while there is none."""
        client_id = self.kazoo.client_id
        return None if client_id is None else int(client_id[0])

    def wait(self, async_result: Any) -> Any:
        """The result of a kazoo async call, waiting at most the session timeout."""
        try:
            return async_result.get(timeout=self.op_timeout_s)
        except KazooTimeoutError:
            raise KazooTimeoutError(
                f"no answer from ZooKeeper within {self.op_timeout_s}s"
            ) from None

    def data_or_none(self, async_result: Any) -> bytes | None:
        """The data of an async get, None if the znode does not exist."""
        try:
            data, _ = self.wait(async_result)
        except NoNodeError:
            return None
        return bytes(data)

    def get(
        self, path: str, watch: Callable[[WatchedEvent], None] | None = None
    ) -> tuple[bytes, ZnodeStat] | None:
        try:
            data, stat = self.wait(self.kazoo.get_async(path, watch=watch))
        except NoNodeError:
            return None
        return bytes(data), stat

    def exists(
        self, path: str, watch: Callable[[WatchedEvent], None] | None = None
    ) -> ZnodeStat | None:
        stat: ZnodeStat | None = self.wait(self.kazoo.exists_async(path, watch=watch))
        return stat

    def children(self, path: str) -> list[str]:
        """The children of ``path``, [] if it does not exist."""
        try:
            children: list[str] = self.wait(self.kazoo.get_children_async(path))
        except NoNodeError:
            return []
        return children

    def ensure_path(self, path: str) -> None:
        """Creates ``path`` and its ancestors where missing (empty data)."""
        current = ""
        for part in path.strip("/").split("/"):
            current += "/" + part
            try:
                self.wait(self.kazoo.create_async(current, b""))
            except NodeExistsError:
                continue
