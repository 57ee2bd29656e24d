"""The nemesis of a randomized run: faults on a ``SystemCluster`` whose processes have their own
loopback addresses (``own_hosts``), inside the test's network namespace. It cuts random links
(one way or both ways, ``tests.support.network``), kills processes with -9 and pauses them with
SIGSTOP; ``heal`` undoes every fault at once: heals the cuts, resumes the paused, restarts the
killed. Each fault and each heal is an operation of the run's history (``process`` nemesis)."""

from __future__ import annotations

import random
from collections.abc import Callable

from cli.launch.zookeeper import ZooKeeperError
from system_tests.harness import ZOOKEEPER, SystemCluster
from system_tests.history import History
from tests.support.network import Network
from tests.support.processes import DaemonProcess

__all__ = ["Nemesis"]

# A ZooKeeper JVM under load has aborted while starting; an operator would start it again.
ZOOKEEPER_STARTS = 3


class Nemesis:
    def __init__(
        self, cluster: SystemCluster, network: Network, history: History, rng: random.Random
    ) -> None:
        self._cluster = cluster
        self._network = network
        self._history = history
        self._rng = rng
        self._undo: list[tuple[str, str, Callable[[], None]]] = []  # (op, process, undo)
        self._hit: set[str] = set()  # processes paused or killed, until the heal

    @property
    def processes(self) -> list[str]:
        """Every process a fault may hit, ZooKeeper included in its mode."""
        return sorted(self._cluster.hosts)

    def strike(self) -> None:
        """One random fault: a cut (half of the time), a kill -9 or a pause."""
        fault = self._rng.choice([self.cut, self.cut, self.kill, self.pause])
        fault()

    def cut(self) -> None:
        sender, receiver = self._rng.sample(self.processes, 2)
        both_ways = self._rng.random() < 0.5
        operation = self._history.invoke(
            "nemesis", "cut", sender=sender, receiver=receiver, both_ways=both_ways
        )
        self._network.cut(sender, receiver, both_ways=both_ways)
        operation.ok()

    def kill(self) -> None:
        name = self._victim()
        if name is None:
            return
        operation = self._history.invoke("nemesis", "kill", process=name)
        if name == ZOOKEEPER:
            assert self._cluster.zookeeper is not None
            self._cluster.zookeeper.kill()
            self._undo.append(("restart", name, self._start_zookeeper))
        else:
            process = self._daemon(name)
            process.kill()
            self._undo.append(("restart", name, process.start))
        operation.ok()

    def pause(self) -> None:
        name = self._victim(daemons_only=True)
        if name is None:
            return
        process = self._daemon(name)
        operation = self._history.invoke("nemesis", "pause", process=name)
        process.pause()
        self._undo.append(("resume", name, process.resume))
        operation.ok()

    def heal(self) -> None:
        """Every link back, every paused process resumed, every killed one restarted."""
        operation = self._history.invoke("nemesis", "heal")
        self._network.heal()
        # Resumed before restarted: a restart may wait on a paused process (its ZooKeeper).
        for op, name, undo in sorted(self._undo, key=lambda u: u[0] != "resume"):
            step = self._history.invoke("nemesis", op, process=name)
            undo()
            step.ok()
        self._undo.clear()
        self._hit.clear()
        operation.ok()

    def _victim(self, daemons_only: bool = False) -> str | None:
        """A process no fault of this round hit yet (None if none is left)."""
        names = [n for n in self.processes if n not in self._hit]
        if daemons_only:
            names = [n for n in names if n != ZOOKEEPER]
        if not names:
            return None
        name = self._rng.choice(names)
        self._hit.add(name)
        return name

    def _daemon(self, name: str) -> DaemonProcess:
        daemons = [*self._cluster.controllers, *self._cluster.brokers.values()]
        return next(p for p in daemons if p.name == name)

    def _start_zookeeper(self) -> None:
        assert self._cluster.zookeeper is not None
        for attempt in range(1, ZOOKEEPER_STARTS + 1):
            try:
                self._cluster.zookeeper.start()
                return
            except ZooKeeperError as e:
                if attempt == ZOOKEEPER_STARTS:
                    raise
                print(f"nemesis: ZooKeeper did not start (attempt {attempt}): {e}"[:2000])
