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
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

IN_NAMESPACE_ENV = "TIERED_TEST_NETNS"
"""Set (to the namespace's id) in the child pytest that runs inside the namespace."""

_TABLE = "tiered_partitions"


class NamespaceUnavailableError(RuntimeError):
    """The test's network namespace could not be made here (says why)."""


def in_test_namespace() -> bool:
    return bool(os.environ.get(IN_NAMESPACE_ENV))


def run_in_fresh_namespace(
    nodeid: str, rootdir: Path, timeout_s: float, *, show_output: bool = False
) -> None:
    """Runs the test ``nodeid`` in a child pytest inside a new network namespace, with loopback
    up; raises ``AssertionError`` with the child's output when it fails and
    ``NamespaceUnavailableError`` when the namespace cannot be made. ``show_output`` (the
    parent runs with ``-s``): the child runs with ``-s`` too, and its output is printed when it
    passes as well."""
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
    env = {**os.environ, IN_NAMESPACE_ENV: uuid.uuid4().hex[:12]}
    command = [
        unshare,
        "--net",
        "sh",
        "-c",
        'ip link set lo up && exec "$@"',
        "netns",
        sys.executable,
        "-m",
        "pytest",
        nodeid,
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        # Selected whatever the default marker expression deselects (a soak is ``netns`` too).
        "-m",
        "netns",
        *(["-s"] if show_output else []),
    ]
    result = subprocess.run(
        command,
        check=False,
        cwd=rootdir,
        env=env,
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

    def cut(self, sender: str, receiver: str, *, both_ways: bool = False) -> None:
        """``sender`` reaches ``receiver`` no more (and the other way round with
        ``both_ways``)."""
        pairs = [(sender, receiver)] + ([(receiver, sender)] if both_ways else [])
        for a, b in pairs:
            if (a, b) in self._rules:
                continue
            comment = f"{a}->{b}"
            _nft(
                f"add rule inet {_TABLE} out socket cgroupv2 level {self._level(a)} "
                f'"{self._cgroup_path(a)}" ip daddr {self.hosts[b]} drop comment "{comment}"'
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
