"""The bulk delete's SparkSession, kept off the delete jobs' critical path (issue 29).

One :class:`SparkSessionProvider` per controller process owns the session on one background
thread (``spark-session``), which alone starts, checks and stops it; nothing else ever waits
for a start but a job that needs the session while it starts (and it waits for what remains of
that start only, saying so in the log).

- **A cluster master** (``spark://...``; any master but ``local``): the active controller wants
  its session from the start of its term (:meth:`SparkSessionProvider.term_started`, called by
  the controller's ``serve``) to its end (:meth:`~SparkSessionProvider.term_ended`, its
  ``stand_down``) and starts it in the background at once, so the application is registered
  with the master before any job. Its executors follow Spark's dynamic allocation (on the
  standalone master without an external shuffle service: ``shuffleTracking``): the ones asked
  for at the start are kept for ``bulk.delete.spark.idle.timeout.ms`` (default 10 minutes)
  without a task, then given back to the workers; a job asks for them again (seconds: an
  executor's start, not a session's). So an idle controller keeps its application (a driver
  and a registration) but not the workers' cores.
- **local** (``local[*]``, the default): as before, the session starts when the first job needs
  it and is kept until the process exits. Starting it in the background at each activation
  would put a driver JVM (hundreds of MB) in every active controller that never runs a large
  job, and local executors are the driver's own threads: there are no workers' cores to give
  back.

While the session is up the thread checks it every ``probe_interval_s``: the SparkContext must
not be stopped, and on a cluster master the master must still know the application (the
driver asks it again for the executors it already asked for, a no-op: a master that does not
know the application answers False; an unreachable one fails the call, and so does a master
restarted on the same address, as pyspark 4's driver keeps the broken connection). A check
that says the session is lost, :data:`FAILED_PROBES_LOST` checks in a row that fail, or a failed
start has the session stopped and started again after the delay of the
:class:`~tiered.retry.ExponentialBackoff` schedule (a job that waits for the session asks for
the next attempt at once). A driver JVM that died is replaced at the next start. A Spark job
that fails asks for a check at once (:meth:`SparkSessionProvider.check_soon`); a job running on
an application the master lost may not fail by itself (it can wait for executors that never
come): it fails when the lost session is stopped under it, and the engine's retry takes the new
session.

Everything runs under the provider's own lock, never the controller's term lock, and the lock
is never held while a session starts or stops. An iteration of the thread that fails is logged,
and the thread carries on after a backoff delay.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from controller.config import DEFAULT_SPARK_IDLE_TIMEOUT_MS, SPARK_IDLE_TIMEOUT_KEY
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import SPARK_SESSION_BACKOFF
from tiered.security.spark_auth import REDACTION_KEY, REDACTION_REGEX, SECRET_KEY, without_secret

logger = logging.getLogger(__name__)

APP_NAME = "tiered-bulk-delete"
DEFAULT_MASTER = "local[*]"
PROBE_INTERVAL_S = 5.0
"""How often the thread checks a session that is up."""
FAILED_PROBES_LOST = 2
"""Checks in a row that could not tell (the master unreachable) before the session counts as
lost. A check that tells it is lost (the master does not know the application, the context
stopped) counts at once."""
MASTER_CONNECT_TIMEOUT_S = 5.0
"""How long a start waits for a standalone master to accept a connection before it fails."""
CLOSE_TIMEOUT_S = 20.0
"""How long :meth:`SparkSessionProvider.close` waits for the thread (a start in progress ends
first); past it the process exits without, and its driver JVM (PySpark's gateway, which exits
when its parent does) with it. Within ``tiered-cluster down``'s 30 s before SIGKILL."""

_LOG4J2_PROPERTIES = """\
# Written by controller.jobs.spark_session: Spark's own logs at warn, on stderr.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


class SparkSessionUnavailableError(RuntimeError):
    """No session: its start failed (the error says why), or the provider is closed."""


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[N,F]``, ``local-cluster[...]``: Spark in this process."""
    return master.strip().lower().startswith("local")


def effective_master(master: str | None, conf: Mapping[str, str]) -> str | None:
    """The master a provider sets on the builder (None: left to ``conf`` or spark-submit)."""
    if master:
        return master
    if "spark.master" in conf or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None  # conf carries it, or spark-submit launched us with its --master
    return DEFAULT_MASTER


# ============================================================================= what starts sessions


class SessionFactory(Protocol):
    """What starts, checks and stops a session (:class:`PySparkSessions`; a fake in tests).
    Each call may take seconds; the provider makes them from its thread, one at a time."""

    def start(self) -> Any:
        """A new session (raises when it cannot start)."""

    def healthy(self, session: Any) -> bool:
        """False when ``session`` is lost (stopped, or its application unknown to the master);
        raises when it cannot tell (the master unreachable)."""

    def stop(self, session: Any) -> None:
        """Stops ``session`` (a lost one too)."""


class SessionObserver(Protocol):
    """Told of the session's life (the controller's metrics)."""

    def spark_session_up(self, up: bool) -> None: ...

    def spark_session_started(self, seconds: float) -> None: ...

    def spark_session_start_failed(self) -> None: ...

    def spark_session_lost(self) -> None: ...


class _Unobserved:
    def spark_session_up(self, up: bool) -> None:
        pass

    def spark_session_started(self, seconds: float) -> None:
        pass

    def spark_session_start_failed(self) -> None:
        pass

    def spark_session_lost(self) -> None:
        pass


def _master(master: str | None) -> dict[str, str]:
    return {"spark.master": master} if master is not None else {}


def _launch_driver_jvm(settings: Mapping[str, str]) -> None:
    """Starts PySpark's driver JVM with ``settings`` unless it runs: PySpark puts the settings
    of the JVM it launches on that JVM's command line (``--conf KEY=VALUE``, shown by ``ps``),
    so a JVM that is to hold a secret is started without it, and the secret is set later through
    the gateway."""
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)  # no JVM yet: a plain mapping
    conf.setAll(list(settings.items()))
    SparkContext._ensure_initialized(conf=conf)


class PySparkSessions:
    """Starts PySpark sessions. Settings from NOTES.md: ``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` default to this interpreter, and so does ``spark.pyspark.python``
    (the Python that executors run, on a standalone cluster's workers too: the system python
    would lack the ``tiered`` library), ``SPARK_LOCAL_IP`` to 127.0.0.1, no UI, no console
    progress bar, Spark's log4j2 at warn, ``spark.redaction.regex`` covering credential keys
    (:mod:`tiered.security.spark_auth`). On a cluster master, dynamic allocation with shuffle
    tracking, executors idle for ``idle_timeout_ms`` given back, and as many executors asked for
    at the start as ``spark.cores.max`` / ``spark.executor.cores`` allows (when both are set).
    The rest comes with ``conf`` (``spark.cores.max``, ``spark.executor.memory``,
    ``spark.driver.host``: ``tiered-cluster up`` writes them in the controllers' properties),
    whose entries are applied last (``spark.driver.extraJavaOptions`` /
    ``spark.executor.extraJavaOptions`` given there are kept, after the log4j2 option).
    ``master`` is set only when given, or else when neither ``conf`` (``spark.master``) nor a
    ``spark-submit`` launch provides one: then it is ``local[*]``. A ``spark.authenticate.secret``
    in ``conf`` never reaches a command line: the driver's JVM starts without it and gets it
    through the gateway."""

    def __init__(
        self,
        master: str | None = None,
        conf: Mapping[str, str] | None = None,
        idle_timeout_ms: int = DEFAULT_SPARK_IDLE_TIMEOUT_MS,
    ) -> None:
        if idle_timeout_ms < 0:
            raise ValueError(f"{SPARK_IDLE_TIMEOUT_KEY} must be >= 0, not {idle_timeout_ms}")
        self.master = master
        self.conf = dict(conf or {})
        self.idle_timeout_ms = idle_timeout_ms
        self._tmpdirs: dict[int, str] = {}  # id(session) -> its log4j2 directory

    @property
    def known_master(self) -> str | None:
        """The master, when this process knows it (not when spark-submit chose it)."""
        return effective_master(self.master, self.conf) or self.conf.get("spark.master")

    @property
    def on_cluster(self) -> bool:
        """A cluster master (executors on workers), not Spark in this process."""
        master = self.known_master
        return master is not None and not is_local_master(master)

    def settings(self, java_option: str = "") -> dict[str, str]:
        """The session's settings (``spark.*``), ``java_option`` first in the JVMs' options."""
        settings = {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            REDACTION_KEY: REDACTION_REGEX,
            "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
        }
        if self.on_cluster:
            idle = f"{self.idle_timeout_ms}ms"
            settings.update(
                {
                    "spark.dynamicAllocation.enabled": "true",
                    "spark.dynamicAllocation.shuffleTracking.enabled": "true",
                    "spark.dynamicAllocation.executorIdleTimeout": idle,
                    "spark.dynamicAllocation.shuffleTracking.timeout": idle,
                }
            )
            executors = self._executors_wanted()
            if executors and self.idle_timeout_ms > 0:
                settings["spark.dynamicAllocation.initialExecutors"] = str(executors)
        settings.update(self.conf)
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            settings[key] = " ".join(filter(None, [java_option, self.conf.get(key)]))
        return settings

    def _executors_wanted(self) -> int | None:
        try:
            cores = int(self.conf["spark.cores.max"])
            per_executor = int(self.conf["spark.executor.cores"])
        except (KeyError, ValueError):
            return None
        return max(1, cores // per_executor) if cores > 0 and per_executor > 0 else None

    def start(self) -> Any:
        from pyspark.sql import SparkSession  # noqa: PLC0415 - the JVM only where Spark is used

        self._check_master_reachable()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        tmpdir = tempfile.mkdtemp(prefix="tiered-spark-")
        log4j2 = Path(tmpdir) / "log4j2.properties"
        log4j2.write_text(_LOG4J2_PROPERTIES, encoding="utf-8")
        builder = SparkSession.builder.appName(APP_NAME)
        master = effective_master(self.master, self.conf)
        if master is not None:
            builder = builder.master(master)
        settings, secret = without_secret(
            self.settings(f"-Dlog4j2.configurationFile={log4j2.as_uri()}")
        )
        for key, value in settings.items():
            builder = builder.config(key, value)
        started = time.perf_counter()
        try:
            if secret is not None:
                _launch_driver_jvm({"spark.app.name": APP_NAME, **_master(master), **settings})
                builder = builder.config(SECRET_KEY, secret)
            session = builder.getOrCreate()
            if session.sparkContext._jsc.sc().isStopped():
                raise SparkSessionUnavailableError("the SparkContext stopped as it started")
        except BaseException:
            self._stop_leftover_context()
            self._forget_dead_driver()
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
        self._tmpdirs[id(session)] = tmpdir
        logger.info(
            "SparkSession %s started in %.1f s (master %s, python %s)",
            APP_NAME,
            time.perf_counter() - started,
            session.sparkContext.master,
            os.environ["PYSPARK_PYTHON"],
        )
        return session

    def _check_master_reachable(self) -> None:
        """On a standalone master, fails at once when no master of ``spark://H:P[,H:P]``
        accepts a connection: Spark itself would try to register for about a minute (three
        attempts, 20 s apart) before giving up, and a master back meanwhile would wait for the
        next of them."""
        master = self.known_master or ""
        if not master.startswith("spark://"):
            return
        addresses = [a.strip() for a in master.removeprefix("spark://").split(",") if a.strip()]
        errors = []
        for address in addresses:
            host, _, port = address.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=MASTER_CONNECT_TIMEOUT_S):
                    return
            except (OSError, ValueError) as e:
                errors.append(f"{address}: {e}")
        raise SparkSessionUnavailableError(f"no Spark master reachable ({'; '.join(errors)})")

    @staticmethod
    def _stop_leftover_context() -> None:
        """A start that failed half-way (the master unreachable: Spark gives up after its
        registration attempts and stops the context it made) leaves PySpark's active context
        behind, which the next ``getOrCreate`` would return: stop it."""
        from pyspark import SparkContext  # noqa: PLC0415

        leftover = SparkContext._active_spark_context
        if leftover is not None:
            with contextlib.suppress(Exception):
                leftover.stop()

    def healthy(self, session: Any) -> bool:
        context = session.sparkContext._jsc.sc()
        if context.isStopped():
            return False
        if is_local_master(str(session.sparkContext.master)):
            return True
        # Asks the master again for the executors the driver already asked for (no change):
        # False when the master does not know the application (it restarted without recovery,
        # or removed it); raises when it cannot be reached.
        return bool(context.requestExecutors(0))

    def stop(self, session: Any) -> None:
        try:
            session.stop()
        finally:
            tmpdir = self._tmpdirs.pop(id(session), None)
            if tmpdir is not None:
                shutil.rmtree(tmpdir, ignore_errors=True)
            self._forget_dead_driver()

    @staticmethod
    def _forget_dead_driver() -> None:
        """When the driver JVM (PySpark's gateway process) has died, PySpark keeps its gateway
        and every later start fails on it: forget it, so that the next start launches a JVM."""
        from pyspark import SparkContext  # noqa: PLC0415
        from pyspark.sql import SparkSession  # noqa: PLC0415

        gateway = SparkContext._gateway
        process = getattr(gateway, "proc", None)
        if gateway is None or process is None or process.poll() is None:
            return  # no JVM of ours, one not launched by PySpark, or alive
        logger.warning(
            "The Spark driver JVM exited (status %s); the next start launches one",
            process.returncode,
        )
        with contextlib.suppress(Exception):
            gateway.shutdown()
        with SparkContext._lock:
            SparkContext._gateway = None
            SparkContext._jvm = None
            SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None


# ============================================================================= the provider


class SparkSessionProvider:
    """The controller's one SparkSession (see the module docstring): :meth:`get` for a job,
    :meth:`term_started` / :meth:`term_ended` from the controller's term hooks, :meth:`close` at
    exit. ``factory`` defaults to :class:`PySparkSessions` over ``master``, ``conf`` and
    ``idle_timeout_ms``; tests pass a fake one, with ``background`` saying whether terms start
    it (default: whether the master is a cluster master)."""

    def __init__(
        self,
        master: str | None = None,
        conf: Mapping[str, str] | None = None,
        *,
        idle_timeout_ms: int = DEFAULT_SPARK_IDLE_TIMEOUT_MS,
        factory: SessionFactory | None = None,
        background: bool | None = None,
        observer: SessionObserver | None = None,
        backoff: ExponentialBackoff = SPARK_SESSION_BACKOFF,
        probe_interval_s: float = PROBE_INTERVAL_S,
    ) -> None:
        self._master = master
        self._conf = dict(conf or {})
        sessions = PySparkSessions(master, conf, idle_timeout_ms)
        self._factory: SessionFactory = factory if factory is not None else sessions
        self.background = sessions.on_cluster if background is None else background
        self._observer: SessionObserver = observer if observer is not None else _Unobserved()
        self._backoff = backoff
        self._probe_interval_s = probe_interval_s
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._session: Any = None
        self._active = False  # a term wants the session (background mode)
        self._demanded = False  # a caller of get() wants it
        self._closing = False
        self._starting = False
        self._stopping = False
        self._start_began = 0.0
        self._attempts = 0  # start attempts finished, successful or not
        self._last_error = ""
        # Failed starts and lost sessions since one was last seen healthy (under _cond).
        self._start_backoff = Backoff(backoff)
        self._next_attempt = 0.0
        self._hurry = False  # a caller waits: the next attempt now, not after the backoff
        self._failed_probes = 0
        self._next_probe = 0.0
        self._probe_now = False
        self.start_seconds: float | None = None
        """How long the last session took to start."""

    # ----------------------------------------------------------------------------- reading

    @property
    def started(self) -> bool:
        return self._session is not None

    def master_description(self) -> str:
        """The master a session runs on, as log lines name it (known before it starts)."""
        return self.effective_master() or self._conf.get("spark.master") or "spark-submit's master"

    def effective_master(self) -> str | None:
        """The master this provider sets on the builder (None: left to conf or spark-submit)."""
        return effective_master(self._master, self._conf)

    # ----------------------------------------------------------------------------- term hooks

    def term_started(self) -> None:
        """The controller became active: in background mode, the session is started now (on
        the provider's thread; this returns at once) and kept for the term."""
        if not self.background:
            return
        with self._cond:
            if self._closing:
                return
            self._active = True
            self._start_backoff.reset()
            self._next_attempt = 0.0
            self._ensure_thread()
            self._cond.notify_all()
        logger.info("Active: starting the SparkSession on %s in the background", self._where())

    def term_ended(self) -> None:
        """The term ended: in background mode, the session is stopped (on the provider's
        thread: this returns at once; a start in progress is stopped once it ends)."""
        if not self.background:
            return
        with self._cond:
            self._active = False
            self._demanded = False
            self._cond.notify_all()

    # ----------------------------------------------------------------------------- jobs

    def get(self) -> Any:
        """The session: at once when it is up; else this waits for the start in progress, or
        asks for one now, and returns once it is up (logging the wait), or raises
        :class:`SparkSessionUnavailableError` when that start failed."""
        with self._cond:
            if self._closing:
                raise SparkSessionUnavailableError("the SparkSession provider is closed")
            self._demanded = True
            if self._session is not None:
                return self._session
            self._ensure_thread()
            waiting_from = time.monotonic()
            start_began = self._start_began if self._starting else None
            attempts = self._attempts
            if not self._starting:
                self._hurry = True
                self._cond.notify_all()
            while self._session is None:
                if self._closing:
                    raise SparkSessionUnavailableError("the SparkSession provider is closed")
                if not self._wanted() and not self._starting:
                    raise SparkSessionUnavailableError("the SparkSession was stopped meanwhile")
                if self._attempts > attempts:
                    raise SparkSessionUnavailableError(
                        f"the SparkSession on {self._where()} could not start: {self._last_error}"
                    )
                self._cond.wait()
            session = self._session
        waited = time.monotonic() - waiting_from
        if start_began is not None:
            logger.info(
                "Waited %.1f s for the SparkSession on %s: the rest of its start, begun %.1f s "
                "before the job asked",
                waited,
                self._where(),
                waiting_from - start_began,
            )
        else:
            logger.info(
                "Waited %.1f s for the SparkSession on %s to start for this job",
                waited,
                self._where(),
            )
        return session

    def check_soon(self) -> None:
        """A Spark job failed: check the session now rather than at the next interval."""
        with self._cond:
            if self._session is not None:
                self._probe_now = True
                self._cond.notify_all()

    # ----------------------------------------------------------------------------- stopping

    def stop(self) -> None:
        """Stops the session (once a start in progress ends) and returns when it is stopped.
        Idempotent; a later :meth:`get` or :meth:`term_started` starts anew."""
        with self._cond:
            self._active = False
            self._demanded = False
            self._cond.notify_all()
            while self._thread is not None and (
                self._session is not None or self._starting or self._stopping
            ):
                self._cond.wait()

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stops the session and the thread (the controller exits). Idempotent."""
        with self._cond:
            self._closing = True
            self._active = False
            self._demanded = False
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("The SparkSession did not stop within %.0f s", timeout_s)

    # ----------------------------------------------------------------------------- the thread

    def _where(self) -> str:
        return self.master_description()

    def _wanted(self) -> bool:
        return (self._active or self._demanded) and not self._closing

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spark-session", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        backoff = Backoff(self._backoff)
        while True:
            with self._cond:
                action = self._next_action()
                if action is None:
                    self._thread = None
                    self._cond.notify_all()
                    return
            try:
                action()
                backoff.reset()
            except Exception:
                delay = backoff.next_delay()
                logger.exception("SparkSession upkeep failed; carrying on in %.1f s", delay)
                with self._cond:
                    self._starting = self._stopping = False
                    self._cond.notify_all()
                    self._cond.wait(delay)

    def _next_action(self) -> Callable[[], None] | None:
        """Under the lock: what the thread does next, once there is something to do (None:
        closed, and nothing left to stop)."""
        while True:
            now = time.monotonic()
            if self._session is not None and not self._wanted():
                self._stopping = True
                return self._stop_unwanted
            if self._closing:
                return None
            if self._session is None and self._wanted():
                if self._hurry or now >= self._next_attempt:
                    self._starting = True
                    self._start_began = now
                    self._hurry = False
                    return self._start
                self._cond.wait(self._next_attempt - now)
                continue
            if self._session is not None:
                if self._probe_now or now >= self._next_probe:
                    self._probe_now = False
                    return self._probe
                self._cond.wait(self._next_probe - now)
                continue
            self._cond.wait()

    def _start(self) -> None:
        began = time.monotonic()
        try:
            session = self._factory.start()
        except Exception as e:
            with self._cond:
                delay = self._start_backoff.next_delay()
                self._next_attempt = time.monotonic() + delay
                self._last_error = _one_line(e)
                self._attempts += 1
                self._starting = False
                self._cond.notify_all()
            logger.warning(
                "The SparkSession on %s could not start after %.1f s (%s); next attempt in %.1f s",
                self._where(),
                time.monotonic() - began,
                self._last_error,
                delay,
            )
            self._observer.spark_session_start_failed()
            return
        seconds = time.monotonic() - began
        with self._cond:
            self._session = session
            self.start_seconds = seconds
            self._attempts += 1
            self._starting = False
            self._failed_probes = 0
            self._next_probe = time.monotonic() + self._probe_interval_s
            self._cond.notify_all()
        self._observer.spark_session_started(seconds)
        self._observer.spark_session_up(True)

    def _probe(self) -> None:
        with self._cond:
            session = self._session
        error: Exception | None = None
        try:
            healthy: bool | None = self._factory.healthy(session)
        except Exception as e:
            healthy, error = None, e
        recovered = lost = False
        delay = 0.0
        with self._cond:
            if session is not self._session:
                return  # stopped meanwhile
            self._next_probe = time.monotonic() + self._probe_interval_s
            if healthy:
                recovered = self._failed_probes > 0
                self._failed_probes = 0
                self._start_backoff.reset()
            else:
                self._failed_probes += 1 if healthy is None else FAILED_PROBES_LOST
                lost = self._failed_probes >= FAILED_PROBES_LOST
                if lost:
                    self._session = None
                    self._stopping = True
                    delay = self._start_backoff.next_delay()
                    self._next_attempt = time.monotonic() + delay
        if healthy:
            if recovered:
                self._observer.spark_session_up(True)
            return
        why = "it stopped or its master no longer knows it" if error is None else _one_line(error)
        self._observer.spark_session_up(False)
        if not lost:
            logger.warning("The SparkSession on %s could not be checked: %s", self._where(), why)
            return
        logger.warning(
            "The SparkSession on %s is lost (%s); stopping it and starting another in %.1f s",
            self._where(),
            why,
            delay,
        )
        self._observer.spark_session_lost()
        try:
            self._factory.stop(session)
        except Exception as e:
            logger.warning("Stopping the lost SparkSession failed: %s", _one_line(e))
        finally:
            with self._cond:
                self._stopping = False
                self._cond.notify_all()

    def _stop_unwanted(self) -> None:
        with self._cond:
            session, self._session = self._session, None
        try:
            self._factory.stop(session)
            logger.info("SparkSession on %s stopped", self._where())
        finally:
            with self._cond:
                self._stopping = False
                self._cond.notify_all()
            self._observer.spark_session_up(False)


def _one_line(error: BaseException) -> str:
    """The first line of ``error`` (Spark's carry Java stack traces)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= 500 else text[:497] + "..."
