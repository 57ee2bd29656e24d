"""``tiered-cluster up|down --data-dir DIR``: a local cluster of separate processes.

``up`` starts a controller and a standby (same metadata directory in KRaft mode) and N brokers
from generated ``.properties`` files under DIR, waits until they serve, and prints the bootstrap
address on its last line. On a directory whose cluster is partly running it starts only what is
missing and reuses the data (ports are chosen once and kept in ``cluster.json``). Each process's
pid is recorded under ``DIR/pids`` and its output goes to ``DIR/logs``. ``down`` stops them with
SIGTERM (gracefully) and waits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tiered.admin import AdminClient
from tiered.cli.common import run
from tiered.errors import ErrorCode, TieredError

START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalCluster:
    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir.resolve()
        self.layout_file = self.dir / "cluster.json"

    def layout(self, brokers: int, metadata: str, zookeeper: str | None) -> dict[str, Any]:
        """The cluster's processes and ports: created on the first ``up``, reused after."""
        if self.layout_file.exists():
            layout: dict[str, Any] = json.loads(self.layout_file.read_text())
            return layout
        if metadata == "zookeeper" and not zookeeper:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                "--metadata zookeeper needs --zookeeper HOST:PORT[/chroot] (a local ZooKeeper "
                "is not started by this command yet)",
            )
        layout = {
            "metadata": metadata,
            "zookeeper": zookeeper,
            "controllers": [_free_port(), _free_port()],
            "brokers": [_free_port() for _ in range(brokers)],
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        self.layout_file.write_text(json.dumps(layout, indent=1))
        return layout

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
        for i, port in enumerate(layout["brokers"], start=1):
            found.append(
                (
                    f"broker-{i}",
                    "broker.main",
                    {
                        "node.id": str(i),
                        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                        "log.dirs": str(self.dir / f"broker-{i}"),
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
        return pid if pid > 0 and _alive(pid) else None

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
        for name, module, properties in self.processes(layout):
            if self.running(name) is None:
                self.start(name, module, properties)
                started.append(name)
        print(
            f"started: {', '.join(started)}" if started else "everything was already running",
            file=sys.stderr,
        )
        bootstrap = self.bootstrap(layout)
        self.wait_until_serving(bootstrap, len(layout["brokers"]))
        return bootstrap

    def wait_until_serving(self, bootstrap: str, brokers: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        with AdminClient(bootstrap, timeout_s=5) as admin:
            while time.monotonic() < deadline:
                try:
                    live = [b for b in admin.describe_cluster().brokers if not b.fenced]
                    if len(live) >= brokers:
                        return
                except TieredError as e:
                    last = e
                time.sleep(0.2)
        raise TieredError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"the cluster did not serve within {START_TIMEOUT_S:.0f}s ({last}); see "
            f"{self.dir / 'logs'}",
        )

    def down(self, timeout_s: float = 30.0) -> list[str]:
        stopped = []
        names = sorted(p.stem for p in (self.dir / "pids").glob("*.pid"))
        # brokers first, so that they leave while the controller still answers
        for name in sorted(names, key=lambda n: not n.startswith("broker")):
            pid = self.running(name)
            if pid is not None:
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + timeout_s
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
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
    up.add_argument("--zookeeper", help="HOST:PORT[/chroot] of a ZooKeeper to use")
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
