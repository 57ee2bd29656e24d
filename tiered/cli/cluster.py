"""``tiered-cluster up|down --data-dir DIR``: a local cluster of separate processes.

``up`` starts a controller and a standby (same metadata directory in KRaft mode) and N brokers
from generated ``.properties`` files under DIR, waits until they serve, and prints the bootstrap
address on its last line. On a directory whose cluster is partly running it starts only what is
missing and reuses the data (ports are chosen once and kept in ``cluster.json``). Each process's
pid is recorded under ``DIR/pids`` and its output goes to ``DIR/logs``. Each broker has a gRPC
listener and a Kafka one (``PLAINTEXT://``); ``cluster.json`` lists the Kafka listeners as
``"kafka_bootstrap_servers": "HOST:PORT,..."`` in broker-id order (DESIGN.md section 10).
``down`` stops them with SIGTERM (gracefully; SIGKILL after a timeout) and waits: brokers first,
then controllers.

``--metadata zookeeper`` without ``--zookeeper`` runs a local ZooKeeper too (``cluster.json``:
``"zookeeper": "127.0.0.1:PORT", "zookeeper_managed": true``): a JVM from Debian's ``zookeeper``
package (``tiered.zookeeper_server``; ``scripts/ensure_env.sh`` installs it), a daemon like the
others, with ``forceSync=yes``, its data under ``DIR/zookeeper``, its config in
``DIR/config/zookeeper.cfg``, pid ``DIR/pids/zookeeper.pid`` and output ``DIR/logs/zookeeper.log``.
``up`` starts it (if it is not running) and waits until it serves before the controllers; ``down``
stops it last. With ``--zookeeper HOST:PORT[/chroot]`` the cluster uses that ZooKeeper and never
starts or stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tiered import zookeeper_server
from tiered.admin import AdminClient
from tiered.cli.common import run
from tiered.daemon_logging import log_tail
from tiered.errors import ErrorCode, TieredError
from tiered.ports import free_port
from tiered.zookeeper_server import ZooKeeperError, ZooKeeperServer

START_TIMEOUT_S = 60.0
ZOOKEEPER = "zookeeper"  # the managed ZooKeeper's name: pid file, log, config, data directory
ZOOKEEPER_START_TIMEOUT_S = 30.0
ZOOKEEPER_TICK_MS = 500
ZOOKEEPER_MAX_SESSION_TIMEOUT_MS = 60_000


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (dead, not yet reaped by its parent) is not running.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _runs_zookeeper(pid: int) -> bool:
    """Whether ``pid`` is a ZooKeeper JVM (not a process that reused a stale pid); true where
    ``/proc`` cannot tell."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return zookeeper_server.MAIN_CLASS.encode() in cmdline


def _process_rank(name: str) -> int:
    """Stop order: brokers leave while the controllers answer, controllers while ZooKeeper does."""
    if name.startswith("broker"):
        return 0
    return 2 if name == ZOOKEEPER else 1


class LocalCluster:
    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir.resolve()
        self.layout_file = self.dir / "cluster.json"

    def layout(self, brokers: int, metadata: str, zookeeper: str | None) -> dict[str, Any]:
        """The cluster's processes and ports: created on the first ``up``, reused after."""
        if self.layout_file.exists():
            layout: dict[str, Any] = json.loads(self.layout_file.read_text())
            if "kafka_brokers" not in layout:  # written before brokers had a Kafka listener
                self._add_kafka_listeners(layout)
                self.layout_file.write_text(json.dumps(layout, indent=1))
            return layout
        managed = metadata == "zookeeper" and not zookeeper
        if managed:
            self.check_zookeeper_requirements()  # before anything is written
        layout = {
            "metadata": metadata,
            "zookeeper": f"127.0.0.1:{free_port()}" if managed else zookeeper,
            "zookeeper_managed": managed,
            "controllers": [free_port(), free_port()],
            "brokers": [free_port() for _ in range(brokers)],
        }
        self._add_kafka_listeners(layout)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(json.dumps(layout, indent=1))
        return layout

    @staticmethod
    def _add_kafka_listeners(layout: dict[str, Any]) -> None:
        """A Kafka listener port per broker, and ``kafka_bootstrap_servers`` (DESIGN.md section
        10: ``HOST:PORT,...`` in broker-id order)."""
        layout["kafka_brokers"] = [free_port() for _ in layout["brokers"]]
        layout["kafka_bootstrap_servers"] = ",".join(
            f"127.0.0.1:{port}" for port in layout["kafka_brokers"]
        )

    def bootstrap(self, layout: dict[str, Any]) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in layout["controllers"])

    def processes(self, layout: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
        """(name, module, properties) of every process, controllers first."""
        common_remote = {
            "remote.storage.root": str(self.dir / "remote"),
            "rlmm.sqlite.path": str(self.dir / "rlmm.db"),
        }
        metadata = (
            {"metadata.store": "kraft", "metadata.log.dir": str(self.dir / "metadata")}
            if layout["metadata"] == "kraft"
            else {"metadata.store": "zookeeper", "zookeeper.connect": layout["zookeeper"]}
        )
        found = []
        for i, port in enumerate(layout["controllers"]):
            found.append(
                (
                    f"controller-{i}",
                    "controller.main",
                    {
                        "node.id": str(1000 + i),
                        "listeners": f"127.0.0.1:{port}",
                        **metadata,
                        **common_remote,
                    },
                )
            )
        link = (
            {"controller.quorum.bootstrap.servers": self.bootstrap(layout)}
            if layout["metadata"] == "kraft"
            else {"zookeeper.connect": layout["zookeeper"]}
        )
        for i, (port, kafka_port) in enumerate(
            zip(layout["brokers"], layout["kafka_brokers"], strict=True), start=1
        ):
            found.append(
                (
                    f"broker-{i}",
                    "broker.main",
                    {
                        "node.id": str(i),
                        "listeners": f"GRPC://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{kafka_port}",
                        "log.dirs": str(self.dir / f"broker-{i}"),
                        "remote.log.manager.task.interval.ms": "1000",  # retention within a second
                        **common_remote,
                        **link,
                    },
                )
            )
        return found

    def _pid_file(self, name: str) -> Path:
        return self.dir / "pids" / f"{name}.pid"

    def running(self, name: str) -> int | None:
        path = self._pid_file(name)
        if not path.exists():
            return None
        pid = int(path.read_text().strip() or 0)
        if pid <= 0 or not _alive(pid):
            return None
        if name == ZOOKEEPER and not _runs_zookeeper(pid):
            return None
        return pid

    # -- the managed ZooKeeper -------------------------------------------------

    @staticmethod
    def check_zookeeper_requirements() -> None:
        """Fail, naming what is missing, if this machine cannot run the local ZooKeeper."""
        try:
            zookeeper_server.check_requirements()
        except ZooKeeperError as e:
            raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e

    def managed_zookeeper(self, layout: dict[str, Any]) -> ZooKeeperServer:
        """The managed ZooKeeper as configured in ``layout`` (a daemon: it outlives ``up``)."""
        _, _, port = layout["zookeeper"].rpartition(":")
        return ZooKeeperServer(
            self.dir / ZOOKEEPER,
            port=int(port),
            start_timeout=ZOOKEEPER_START_TIMEOUT_S,
            tick_time_ms=ZOOKEEPER_TICK_MS,
            min_session_timeout_ms=2 * ZOOKEEPER_TICK_MS,
            max_session_timeout_ms=ZOOKEEPER_MAX_SESSION_TIMEOUT_MS,
            die_with_parent=False,
            force_sync=True,
            config_path=self.dir / "config" / f"{ZOOKEEPER}.cfg",
            log_path=self.dir / "logs" / f"{ZOOKEEPER}.log",
            pid_file=self._pid_file(ZOOKEEPER),
        )

    def ensure_zookeeper(self, layout: dict[str, Any]) -> bool:
        """Start the managed ZooKeeper unless it runs; return once it serves. True if started."""
        server = self.managed_zookeeper(layout)
        pid = self.running(ZOOKEEPER)
        if pid is None:
            self.check_zookeeper_requirements()
            try:
                server.start()
            except ZooKeeperError as e:
                raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
            server.detach()
            return True
        # Started by an earlier `up` (perhaps still starting up): wait until it serves.
        deadline = time.monotonic() + ZOOKEEPER_START_TIMEOUT_S
        while not server.is_serving(timeout=0.5):
            if not _alive(pid) or time.monotonic() >= deadline:
                state = "is running" if _alive(pid) else "exited"
                raise TieredError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"ZooKeeper (pid {pid}) {state} but does not serve on {layout['zookeeper']}; "
                    f"see {server.log_path}",
                )
            time.sleep(0.05)
        return False

    def start(self, name: str, module: str, properties: dict[str, str]) -> Path:
        config = self.dir / "config" / f"{name}.properties"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        log_file = self.dir / "logs" / f"{name}.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", module, "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._pid_file(name).parent.mkdir(parents=True, exist_ok=True)
        self._pid_file(name).write_text(f"{process.pid}\n")
        return log_file

    def up(self, brokers: int, metadata: str, zookeeper: str | None) -> str:
        layout = self.layout(brokers, metadata, zookeeper)
        started = []
        if layout.get("zookeeper_managed") and self.ensure_zookeeper(layout):
            started.append(ZOOKEEPER)
        for name, module, properties in self.processes(layout):
            if self.running(name) is None:
                self.start(name, module, properties)
                started.append(name)
        print(
            f"started: {', '.join(started)}" if started else "everything was already running",
            file=sys.stderr,
        )
        bootstrap = self.bootstrap(layout)
        names = [name for name, _, _ in self.processes(layout)]
        self.wait_until_serving(bootstrap, len(layout["brokers"]), names)
        return bootstrap

    def wait_until_serving(self, bootstrap: str, brokers: int, names: Sequence[str]) -> None:
        """Returns once ``brokers`` brokers are live; fails at once, with the end of its log, if
        one of the ``names`` processes exits meanwhile (a broker that cannot start would otherwise
        show only as a timeout)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        live: list[int] = []
        with AdminClient(bootstrap, timeout_s=5) as admin:
            while time.monotonic() < deadline:
                self._fail_if_exited(names)
                try:
                    live = [b.broker_id for b in admin.describe_cluster().brokers if not b.fenced]
                    if len(live) >= brokers:
                        return
                except TieredError as e:
                    last = e
                time.sleep(0.2)
        raise TieredError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"the cluster did not serve within {START_TIMEOUT_S:.0f}s: live brokers "
            f"{sorted(live)} of {brokers}" + (f", last error: {last}" if last else "") + "; "
            f"see {self.dir / 'logs'}",
        )

    def _fail_if_exited(self, names: Sequence[str]) -> None:
        for name in names:
            if self.running(name) is None:
                log_file = self.dir / "logs" / f"{name}.log"
                raise TieredError(
                    ErrorCode.BROKER_NOT_AVAILABLE
                    if name.startswith("broker")
                    else ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"{name} exited while the cluster was starting; the end of {log_file}:\n"
                    + log_tail(log_file, 15),
                )

    def down(self, timeout_s: float = 30.0) -> list[str]:
        """Stop every recorded process (brokers, controllers, then the managed ZooKeeper): SIGTERM,
        SIGKILL after ``timeout_s``. Returns the names of those that were running."""
        stopped = []
        names = sorted(p.stem for p in (self.dir / "pids").glob("*.pid"))
        for name in sorted(names, key=_process_rank):
            pid = self.running(name)
            if pid is not None:
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + timeout_s
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
                    deadline = time.monotonic() + 5.0
                    while _alive(pid) and time.monotonic() < deadline:
                        time.sleep(0.05)
                stopped.append(name)
            self._pid_file(name).unlink(missing_ok=True)
        return stopped


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tiered-cluster", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start what is missing and wait until it serves")
    up.add_argument("--data-dir", required=True, type=Path)
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--metadata", choices=("kraft", "zookeeper"), default="kraft")
    up.add_argument(
        "--zookeeper",
        help="HOST:PORT[/chroot] of an external ZooKeeper to use with --metadata zookeeper "
        "(without it a local ZooKeeper is started and stopped with the cluster)",
    )
    down = commands.add_parser("down", help="stop every process of the cluster gracefully")
    down.add_argument("--data-dir", required=True, type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def command() -> int:
        cluster = LocalCluster(args.data_dir)
        if args.command == "up":
            if args.brokers < 1:
                raise TieredError(ErrorCode.INVALID_REQUEST, "--brokers must be at least 1")
            print(cluster.up(args.brokers, args.metadata, args.zookeeper), flush=True)
        else:
            stopped = cluster.down()
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0

    return run(command)


if __name__ == "__main__":
    sys.exit(main())
