"""Network partitions between live processes, for tests that run in a network namespace of their
own.

A test marked ``netns`` runs twice over: pytest starts it, ``conftest.py`` sees that the
process is not in a namespace the test made, and runs the same test again in a child pytest
under ``unshare --net`` (loopback up, nothing else), whose outcome is the test's. A namespace that
cannot be made fails the test with the reason; it is never skipped. Nothing outside the
namespace is touched: its loopback is the only interface, and every address is 127.0.0.0/8.

Inside, :class:`Network` cuts links with nftables. Every process of a cluster started with
``TIERED_CGROUP_ROOT`` set lives in a cgroup of its own (``<root>/<process name>``, see
``cli.launch.cgroups``), children included; a cut of ``a`` from ``b`` drops every packet that a
socket of ``a``'s cgroup sends to ``b``'s address. Clients do not choose their source address
(gRPC, kazoo and boto connect from 127.0.0.1), so the cut is by sender and destination:
``cut(a, b)`` stops ``a`` from reaching ``b`` (its connections to ``b`` die, new ones time out)
while ``b`` still reaches ``a``; ``cut(a, b, both_ways=True)`` stops both, which is a full
partition between them, since every connection between two processes is made from one to the
other's address. ``heal`` removes the rules.

A client (a producer, say) has no address of its own: it connects from 127.0.0.1, as every
process does. :meth:`Network.spawn` starts it in a cgroup of its own and marks every connection
it makes (conntrack's mark), so that ``cut(client, b)`` drops what it sends to ``b``'s address
and ``cut(b, client)`` drops what ``b`` sends back on the client's connections, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli.launch.cgroups import in_own_cgroup

IN_NAMESPACE_ENV = "TIERED_TEST_NETNS"
"""Set (to the namespace's id) in the child pytest that runs inside the namespace."""

_TABLE = "tiered_partitions"


class NamespaceUnavailableError(RuntimeError):
    """The test's network namespace could not be made here (says why)."""


def in_test_namespace() -> bool:
    return bool(os.environ.get(IN_NAMESPACE_ENV))


def namespace_command(command: Sequence[str]) -> list[str]:
    """``command`` as run in a new network namespace with loopback up (and nothing else);
    ``NamespaceUnavailableError`` saying why when no namespace can be made here."""
    unshare = shutil.which("unshare")
    nft = shutil.which("nft")
    if unshare is None or nft is None:
        raise NamespaceUnavailableError(
            "a partition test needs util-linux's unshare and nftables' nft (scripts/ensure_env.sh "
            f"installs them): unshare={unshare}, nft={nft}"
        )
    probe = subprocess.run(
        [unshare, "--net", "sh", "-c", "ip link set lo up"],
        check=False,
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        raise NamespaceUnavailableError(
            f"cannot make a network namespace (unshare --net, as root): {probe.stderr.strip()}"
        )
    return [unshare, "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "netns", *command]


def namespace_env() -> dict[str, str]:
    """The environment of a process run by :func:`namespace_command`: this one's, marked as in
    a namespace of its own (a fresh id, which also names its cgroups)."""
    return {**os.environ, IN_NAMESPACE_ENV: uuid.uuid4().hex[:12]}


def run_in_fresh_namespace(
    nodeid: str, rootdir: Path, timeout_s: float, *, show_output: bool = False
) -> None:
    """Runs the test ``nodeid`` in a child pytest inside a new network namespace, with loopback
    up; raises ``AssertionError`` with the child's output when it fails and
    ``NamespaceUnavailableError`` when the namespace cannot be made. ``show_output`` (the
    parent runs with ``-s``): the child runs with ``-s`` too, and its output is printed when it
    passes as well."""
    pytest_command = [sys.executable, "-m", "pytest", nodeid, "-q"]
    pytest_command += ["-p", "no:cacheprovider", "-p", "no:randomly"]
    # Selected whatever the default marker expression deselects (a soak is ``netns`` too).
    pytest_command += ["-m", "netns", *(["-s"] if show_output else [])]
    result = subprocess.run(
        namespace_command(pytest_command),
        check=False,
        cwd=rootdir,
        env=namespace_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if show_output:
        print(result.stdout, result.stderr, sep="", flush=True)
    if result.returncode != 0:
        raise AssertionError(
            f"{nodeid} failed in its network namespace (exit {result.returncode}):\n"
            + result.stdout[-20000:]
            + result.stderr[-5000:]
        )


def cgroup2_mount() -> Path:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` or ``.../unified``)."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    raise NamespaceUnavailableError("no cgroup v2 hierarchy is mounted: cuts match on cgroups")


@dataclass
class Network:
    """The cuts of one test; ``hosts`` maps a process name to its loopback address."""

    cgroup_root: Path
    hosts: dict[str, str]
    _rules: dict[tuple[str, str], str] = field(default_factory=dict)
    _clients: dict[str, int] = field(default_factory=dict)  # name -> its connections' mark

    @classmethod
    def create(cls, hosts: dict[str, str]) -> Network:
        mount = cgroup2_mount()
        root = mount / f"tiered-{os.environ.get(IN_NAMESPACE_ENV) or uuid.uuid4().hex[:12]}"
        root.mkdir(exist_ok=True)
        _nft(f"add table inet {_TABLE}")
        _nft(
            f"add chain inet {_TABLE} out {{ type filter hook output priority 0; policy accept; }}"
        )
        return cls(root, dict(hosts))

    def spawn(self, name: str, command: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
        """Starts ``command`` (``subprocess.Popen`` with ``popen``) as the client ``name``: in the
        cgroup ``<cgroup_root>/<name>``, every connection it makes marked so that cuts to it
        drop the replies on them. The caller waits for it and ends it."""
        mark = self._clients.setdefault(name, len(self._clients) + 1)
        self.cgroup_of(name).mkdir(exist_ok=True)
        _nft(
            f"add rule inet {_TABLE} out socket cgroupv2 level {self._level(name)} "
            f'"{self._cgroup_path(name)}" ct mark set {mark}'
        )
        return subprocess.Popen(in_own_cgroup(command, name, self.cgroup_root), **popen)

    def cut(self, sender: str, receiver: str, *, both_ways: bool = False) -> None:
        """``sender`` reaches ``receiver`` no more (and the other way round with
        ``both_ways``)."""
        pairs = [(sender, receiver)] + ([(receiver, sender)] if both_ways else [])
        for a, b in pairs:
            if (a, b) in self._rules:
                continue
            comment = f"{a}->{b}"
            mark = self._clients.get(b)
            to = f"ip daddr {self.hosts[b]}" if mark is None else f"ct mark {mark}"
            _nft(
                f"add rule inet {_TABLE} out socket cgroupv2 level {self._level(a)} "
                f'"{self._cgroup_path(a)}" {to} drop comment "{comment}"'
            )
            self._rules[(a, b)] = comment

    def heal(self, sender: str | None = None, receiver: str | None = None) -> None:
        """Removes the cuts from ``sender`` to ``receiver`` (and back); every cut when both are
        None."""
        doomed = [pair for pair in self._rules if sender is None or set(pair) == {sender, receiver}]
        handles = dict(_rule_handles())
        for pair in doomed:
            handle = handles.get(self._rules.pop(pair))
            if handle is not None:
                _nft(f"delete rule inet {_TABLE} out handle {handle}")

    def cgroup_of(self, name: str) -> Path:
        return self.cgroup_root / name

    def _cgroup_path(self, name: str) -> str:
        """The cgroup as nft names it: relative to /sys/fs/cgroup."""
        return str(self.cgroup_of(name).relative_to("/sys/fs/cgroup"))

    def _level(self, name: str) -> int:
        """The depth of ``name``'s cgroup in the cgroup v2 tree."""
        return len(self.cgroup_of(name).relative_to(cgroup2_mount()).parts)

    def close(self) -> None:
        """Heals every cut and removes the table and the cgroups (once their processes are
        gone: a cgroup that still has one stays)."""
        self.heal()
        _nft(f"delete table inet {_TABLE}", check=False)
        for cgroup in [path for path in self.cgroup_root.iterdir() if path.is_dir()]:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        with contextlib.suppress(OSError):
            self.cgroup_root.rmdir()


def _nft(command: str, *, check: bool = True) -> str:
    """Runs one nft command, read as a ruleset file line (so quotes reach nft unchanged)."""
    result = subprocess.run(
        ["nft", "-f", "-"], input=command + "\n", capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"nft {command}: {result.stderr.strip()}")
    return result.stdout


def _rule_handles() -> Iterator[tuple[str, str]]:
    """(comment, handle) of every rule of the cut table."""
    listing = subprocess.run(
        ["nft", "-a", "list", "chain", "inet", _TABLE, "out"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in listing.splitlines():
        if 'comment "' in line and "# handle" in line:
            comment = line.split('comment "', 1)[1].split('"', 1)[0]
            yield comment, line.rsplit("# handle", 1)[1].strip()
