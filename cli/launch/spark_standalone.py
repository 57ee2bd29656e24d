"""A Spark standalone cluster (a master and workers) run with pyspark's bundled ``spark-class``:
for tests and for ``tiered-cluster up``. The bulk delete job submits to its master as
``spark://HOST:PORT`` (docs/internals/bulk-delete.md and docs/operations/distributed-profile.md).

``SPARK_HOME`` is pyspark's install directory: its wheel ships ``bin/spark-class`` and the jars,
so nothing beyond pyspark and a JRE is needed. Each daemon is one JVM (``spark-class`` execs
it) listening on ``127.0.0.1`` (or the loopback address ``host`` given: ``--host`` and
``SPARK_LOCAL_IP``, which its web UI and a worker's executors bind as well) on ports chosen once,
with its output in a log file and, if asked, its pid in a pid file. A master counts as started
once its web UI's ``/json/`` page answers ``ALIVE``; a worker once that page lists it as an ALIVE
worker (registered).

A daemon given a ``conf_dir`` reads its settings from that directory's ``spark-defaults.conf``
(``SPARK_CONF_DIR``), written by :func:`write_spark_defaults` readable by its owner only: where a
secured cluster's secret (:mod:`tiered.security.spark_auth`) is given to the master and workers,
never on their command lines. A worker passes the secret on to its executors in their
environment.

As for :class:`cli.launch.zookeeper.ZooKeeperServer`: ``die_with_parent`` (default on) has the
kernel SIGTERM the JVM when the thread that started it dies, so a killed test run leaves no JVM
behind; a daemon that outlives its starter (``tiered-cluster up``) turns it off and calls
``detach()`` after ``start()``. Each JVM runs in its own session (a terminal's Ctrl-C does not
reach it); a worker's executors run in the worker's process group, so :meth:`SparkDaemon.kill`
takes them down with it, as the loss of the worker's machine would.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from cli.launch.ports import LOOPBACK, free_port
from cli.launch.server_launcher import ServerLauncher
from cli.launch.zookeeper import find_java
from cli.security.certs import write_private_file

__all__ = [
    "MASTER_CLASS",
    "WORKER_CLASS",
    "SparkDaemon",
    "SparkError",
    "SparkMaster",
    "SparkStandaloneCluster",
    "SparkWorker",
    "master_state",
    "spark_home",
    "write_spark_defaults",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_MEMORY = "512m"
"""Heap of the master and worker JVMs (Spark's default, 1g, is for big clusters)."""


class SparkError(RuntimeError):
    """A Spark daemon could not be started, or cannot run on this machine."""


def spark_home() -> Path:
    """pyspark's install directory, which holds ``bin/spark-class`` and the jars."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkError("cannot run Spark: pyspark is not installed in this Python environment")
    return Path(spec.origin).parent


def write_spark_defaults(conf_dir: Path, settings: Mapping[str, str]) -> Path:
    """``conf_dir/spark-defaults.conf`` holding ``settings``, readable by its owner only (it may
    hold the cluster's secret); returns ``conf_dir``."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{key} {value}\n" for key, value in settings.items())
    write_private_file(conf_dir / "spark-defaults.conf", text.encode())
    return conf_dir


def master_state(web_url: str, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The master's ``/json/`` page (status, workers, active and completed applications), or
    None when nothing answers at ``web_url``."""
    try:
        with urllib.request.urlopen(f"{web_url}/json/", timeout=timeout_s) as response:
            state: dict[str, Any] = json.loads(response.read())
    except (OSError, ValueError):
        return None
    return state


class SparkDaemon(ServerLauncher):
    """One Spark JVM started through ``spark-class MAIN_CLASS ARGS``; subclasses say which and
    when it serves. Its lifecycle is a :class:`cli.launch.server_launcher.ServerLauncher`'s, but
    ``start()`` neither checks nor replaces its ports, and SIGKILL takes its whole process group.
    """

    main_class = ""
    error = SparkError
    server_name = "Spark"
    kills_group = True  # a worker's executors and their Python workers die with it
    poll_interval_s = 0.1
    environment: ClassVar[Mapping[str, str]] = {}
    """What the JVM's environment adds (``spark-class`` reads a daemon's options there)."""

    def __init__(
        self,
        *,
        log_path: Path | str,
        pid_file: Path | str | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
        port: int | None = None,
        host: str = LOOPBACK,
        conf_dir: Path | None = None,
    ) -> None:
        self.conf_dir = conf_dir
        super().__init__(
            host=host,
            port=port,
            log_path=Path(log_path).resolve(),
            pid_file=pid_file,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            die_with_parent=die_with_parent,
        )

    # -- what subclasses provide -----------------------------------------------

    def arguments(self) -> list[str]:
        raise NotImplementedError

    def is_serving(self) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    # -- lifecycle (stop, kill, detach, close: ServerLauncher's) -----------------

    def command(self) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), self.main_class, *self.arguments()]

    def start(self) -> None:
        """Start the JVM and wait until it serves; ``SparkError`` (the JVM killed) if it exits
        first or does not serve within ``start_timeout``."""
        self._start_once()

    def launch(self) -> None:
        """Start the JVM without waiting (start several, then :meth:`wait_until_serving` each)."""
        self._check_startable()
        if find_java() is None:
            raise SparkError("cannot run Spark: no java in $JAVA_HOME/bin nor on PATH")
        environment = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            **self.environment,
        }
        if self.conf_dir is not None:
            environment["SPARK_CONF_DIR"] = str(self.conf_dir)
        self._spawn_child(self.command(), env=environment)

    def wait_until_serving(self) -> None:
        """Return once the launched JVM serves; ``SparkError`` if it exits first or does not
        serve within ``start_timeout`` of its launch."""
        self._await_serving()

    def _spawn(self) -> None:
        self.launch()

    def _serves_now(self) -> bool:
        return self.is_serving()


class SparkMaster(SparkDaemon):
    """The standalone master: ``spark://HOST:PORT`` for applications and workers, its web UI
    (``/json/``: workers and applications) on ``web_port``."""

    main_class = MASTER_CLASS
    # No REST submission server: it would listen on Spark's fixed port 6066, the same for every
    # master on the host, and jobs are submitted to the master's own port.
    environment: ClassVar[Mapping[str, str]] = {
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"
    }

    def __init__(
        self,
        *,
        log_path: Path | str,
        port: int | None = None,
        web_port: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(log_path=log_path, port=port, **options)
        self.web_port = web_port if web_port is not None else free_port(self.host)

    @property
    def url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    def arguments(self) -> list[str]:
        return ["--host", self.host, "--port", str(self.port), "--webui-port", str(self.web_port)]

    def is_serving(self) -> bool:
        state = master_state(self.web_url, timeout_s=1.0)
        return state is not None and state.get("status") == "ALIVE"

    def describe(self) -> str:
        return f"the Spark master on {self.url}"


class SparkWorker(SparkDaemon):
    """A worker offering ``cores`` cores and ``memory`` to executors, registered with the master
    at ``master_url`` (whose web UI at ``master_web_url`` tells when it is), listening on
    ``port`` with its own web UI on ``web_port``; executors run under ``work_dir``."""

    main_class = WORKER_CLASS

    def __init__(
        self,
        *,
        master_url: str,
        master_web_url: str,
        work_dir: Path | str,
        log_path: Path | str,
        port: int | None = None,
        web_port: int | None = None,
        cores: int = 1,
        memory: str = "1g",
        **options: Any,
    ) -> None:
        super().__init__(log_path=log_path, port=port, **options)
        self.master_url = master_url
        self.master_web_url = master_web_url
        self.work_dir = Path(work_dir).resolve()
        self.web_port = web_port if web_port is not None else free_port(self.host)
        self.cores = cores
        self.memory = memory

    def arguments(self) -> list[str]:
        return [
            "--host", self.host,
            "--port", str(self.port),
            "--webui-port", str(self.web_port),
            "--cores", str(self.cores),
            "--memory", self.memory,
            "--work-dir", str(self.work_dir),
            self.master_url,
        ]  # fmt: skip

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    def is_serving(self) -> bool:
        """Registered: the master lists this worker's id (from the worker's own ``/json/``;
        a killed predecessor on the same port has another id) as ALIVE."""
        own = master_state(self.web_url, timeout_s=1.0)
        state = master_state(self.master_web_url, timeout_s=1.0)
        return (
            own is not None
            and state is not None
            and any(
                worker.get("id") == own.get("id") and worker.get("state") == "ALIVE"
                for worker in state.get("workers", [])
            )
        )

    def describe(self) -> str:
        return f"the Spark worker on {self.host}:{self.port} (master {self.master_url})"


class SparkStandaloneCluster:
    """A master and ``workers`` one-core workers under ``base`` (a work dir and a log each),
    started together: what tests and benchmarks run a Spark job on. ``settings`` (e.g. a
    secured cluster's) go to every daemon's ``spark-defaults.conf`` under ``base/conf``."""

    def __init__(
        self, base: Path, workers: int = 2, settings: Mapping[str, str] | None = None
    ) -> None:
        conf_dir = write_spark_defaults(base / "conf", settings) if settings else None
        self.master = SparkMaster(log_path=base / "master.log", conf_dir=conf_dir)
        self.workers = [
            SparkWorker(
                master_url=self.master.url,
                master_web_url=self.master.web_url,
                work_dir=base / f"worker-{i}",
                log_path=base / f"worker-{i}.log",
                conf_dir=conf_dir,
            )
            for i in range(1, workers + 1)
        ]

    def start(self) -> float:
        """Starts the master, then the workers side by side; returns the seconds it took."""
        started = time.perf_counter()
        self.master.start()
        for worker in self.workers:
            worker.launch()
        for worker in self.workers:
            worker.wait_until_serving()
        return time.perf_counter() - started

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.master.stop()

    def worker_running(self, executor_dir: str) -> SparkWorker:
        """The worker whose work dir holds an executor's working directory."""
        [worker] = [w for w in self.workers if Path(executor_dir).is_relative_to(w.work_dir)]
        return worker
