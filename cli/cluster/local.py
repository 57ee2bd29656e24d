"""A local cluster of separate processes under one data directory: ``up`` starts what is not
running, stage by stage, and returns once it serves; ``down`` stops every recorded process."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from cli.cluster import layout as layouts
from cli.cluster import secure, secure_services
from cli.cluster.daemons import ClusterFiles
from cli.cluster.layout import ClusterRequest, Layout
from cli.cluster.profile import (
    ControllerProbe,
    bootstrap,
    check_overrides,
    cluster_profile,
)
from cli.cluster.services import check_zookeeper_requirements
from cli.cluster.spec import BROKER, STOP_ORDER, ProcessSpec
from tiered.daemon_logging import log_tail
from tiered.errors import ErrorCode, TieredError

START_TIMEOUT_S = 60.0


class LocalCluster:
    def __init__(self, data_dir: Path) -> None:
        self.files = ClusterFiles(data_dir)
        self.dir = self.files.dir
        self.layout_file = self.dir / layouts.FILE_NAME

    def layout(self, request: ClusterRequest) -> Layout:
        """The cluster's processes and ports: created on the first ``up``, reused after."""
        request.check()
        found = layouts.load(self.layout_file)
        if found is not None:
            layouts.check_request(found, request)
            return found
        if layouts.managed_zookeeper(request):
            check_zookeeper_requirements()  # before anything is written
        layout = layouts.create(request)
        if request.secure:
            secure.lay_out(self.files, layout)
            secure_services.lay_out(layout)
        check_overrides(self.files, layout)
        layouts.save(self.layout_file, layout)
        return layout

    def probe(self, layout: Layout) -> ControllerProbe:
        return ControllerProbe(
            bootstrap(layout), credentials=secure.admin_credentials(self.files, layout)
        )

    def profile(self, layout: Layout, probe: ControllerProbe | None = None) -> list[ProcessSpec]:
        return cluster_profile(self.files, layout, probe or self.probe(layout))

    def running(self, name: str) -> int | None:
        """The pid of the cluster's process ``name`` if it runs."""
        layout = layouts.load(self.layout_file)
        specs = {s.name: s for s in self.profile(layout)} if layout is not None else {}
        spec = specs.get(name)
        return self.files.running(name, spec.marker if spec is not None else None)

    def up(self, request: ClusterRequest) -> str:
        """Start every process of the cluster that is not running, stage by stage, each stage
        waited for before the next; return the controllers' bootstrap address once the cluster
        serves (in a secure cluster, once its SCRAM admin exists too)."""
        layout = self.layout(request)
        if secure.is_secure(layout):
            secure.write_files(self.files, layout)
            secure_services.write_files(self.files, layout)
        probe = self.probe(layout)
        started: list[str] = []
        try:
            specs = self.profile(layout, probe)
            for stage in sorted({s.stage for s in specs}):
                in_stage = [s for s in specs if s.stage == stage]
                # Asked before any launch: one launch may start several (an ensemble's members).
                missing = [s for s in in_stage if self.files.running(s.name, s.marker) is None]
                for spec in missing:
                    spec.launch()
                    started.append(spec.name)
                self._wait_until_serving(in_stage, probe)
            secure.ensure_admin_user(self.files, layout, bootstrap(layout))
        finally:
            probe.close()
            print(
                f"started: {', '.join(started)}" if started else "everything was already running",
                file=sys.stderr,
            )
        return bootstrap(layout)

    def _wait_until_serving(self, specs: Sequence[ProcessSpec], probe: ControllerProbe) -> None:
        """Returns once every spec serves; fails at once, with the end of its log, if one of
        them exits meanwhile (a broker that cannot start would otherwise show only as a
        timeout)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            self._fail_if_exited(specs)
            waiting = [s.name for s in specs if not s.serving()]
            if not waiting:
                return
            if time.monotonic() >= deadline:
                last = probe.last_error
                raise TieredError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"the cluster did not serve within {START_TIMEOUT_S:.0f}s: waiting for "
                    f"{', '.join(waiting)}" + (f", last error: {last}" if last else "") + "; "
                    f"see {self.dir / 'logs'}",
                )
            time.sleep(0.2)

    def _fail_if_exited(self, specs: Sequence[ProcessSpec]) -> None:
        for spec in specs:
            if self.files.running(spec.name, spec.marker) is None:
                log_file = self.files.log_file(spec.name)
                raise TieredError(
                    ErrorCode.BROKER_NOT_AVAILABLE
                    if spec.role == BROKER
                    else ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"{spec.name} exited while the cluster was starting; the end of {log_file}:\n"
                    + log_tail(log_file, 15),
                )

    def down(self, timeout_s: float = 30.0) -> list[str]:
        """Stop every recorded process (brokers, controllers, Spark, S3, then ZooKeeper):
        SIGTERM, SIGKILL after ``timeout_s``. Returns the names of those that were running."""
        layout = layouts.load(self.layout_file)
        specs = {s.name: s for s in self.profile(layout)} if layout is not None else {}
        names = sorted({*specs, *self.files.recorded_names()})

        def rank(name: str) -> tuple[int, str]:
            spec = specs.get(name)
            role = spec.role if spec is not None else name.rsplit("-", 1)[0]
            return (STOP_ORDER.index(role) if role in STOP_ORDER else len(STOP_ORDER), name)

        stopped = []
        for name in sorted(names, key=rank):
            spec = specs.get(name)
            if self.files.stop(name, spec.marker if spec is not None else None, timeout_s):
                stopped.append(name)
        return stopped
