"""What ``scripts/demo.py`` reads from the cluster it started, besides the CLIs' output: the
remote objects per tiered epoch (files under ``DIR/remote`` in the local profile, objects in
the S3 bucket through the endpoint in the distributed one), the controllers' bulk-delete
settings and the log line naming a bulk delete's engine, and the Spark master's applications
(its web UI's ``/json/``) and what its REST API tells of their stages."""

from __future__ import annotations

import configparser
import json
import re
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FAST_PATH_KEY = "bulk.delete.fast.path.max.objects"
DEFAULT_FAST_PATH_MAX_OBJECTS = 2000  # the controller's default (README, "Bulk delete")
SPARK_APP_NAME = "tiered-bulk-delete"  # the controllers' Spark application
_EPOCH = re.compile(r"/(te=\d+)/")
# The controller's one line per delete job (controller/jobs/runner.py) naming its engine.
_ENGINE_LINE = re.compile(
    r"(Bulk delete of topic (\S+) below tiered epoch (\d+): (\d+) objects, "
    r"engine (Spark|in process)\b.*)$"
)


@dataclass(frozen=True)
class EngineLine:
    """A controller's log line saying where a bulk delete ran and why."""

    text: str
    objects: int
    on_spark: bool


def read_properties(path: Path) -> dict[str, str]:
    properties = {}
    for line in path.read_text().splitlines():
        key, equals, value = line.partition("=")
        if equals and not key.lstrip().startswith("#"):
            properties[key.strip()] = value.strip()
    return properties


class ClusterView:
    """The cluster in ``data_dir`` as its files and endpoints show it (after ``up``)."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir
        self.layout: dict[str, Any] = json.loads((data_dir / "cluster.json").read_text())
        # Every broker and controller has the same remote storage settings: read broker 1's.
        self.remote = read_properties(data_dir / "config" / "broker-1.properties")

    @property
    def on_s3(self) -> bool:
        return "s3_endpoint" in self.layout

    @property
    def remote_storage(self) -> str:
        """Where the remote objects are, for the narration."""
        root = self.remote["remote.storage.root"]
        return f"{root} on {self.layout['s3_endpoint']}" if self.on_s3 else root

    def remote_objects_by_epoch(self) -> Counter[str]:
        """Remote objects per tiered epoch directory (``te=N``)."""
        counts: Counter[str] = Counter()
        for key in self._remote_keys():
            match = _EPOCH.search(key)
            if match:
                counts[match.group(1)] += 1
        return counts

    def _remote_keys(self) -> list[str]:
        root = self.remote["remote.storage.root"]
        if not self.on_s3:
            return [str(path) for path in Path(root).rglob("*") if path.is_file()]
        import boto3  # noqa: PLC0415 - only the distributed profile lists S3 (moto brings it)

        bucket, _, prefix = root.removeprefix("s3://").partition("/")
        credentials = configparser.ConfigParser()
        credentials.read(self.remote["remote.storage.s3.credentials.file"])
        s3 = boto3.client(
            "s3",
            endpoint_url=self.remote["remote.storage.s3.endpoint.url"],
            region_name=self.remote.get("remote.storage.s3.region"),
            verify=self.remote.get("remote.storage.s3.ca.file"),  # a secure cluster's CA
            aws_access_key_id=credentials["default"]["aws_access_key_id"],
            aws_secret_access_key=credentials["default"]["aws_secret_access_key"],
        )
        keys = []
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/")
        for page in pages:
            keys.extend(f"/{item['Key']}" for item in page.get("Contents", []))
        return keys

    def fast_path_max_objects(self) -> int:
        """The controller's ``bulk.delete.fast.path.max.objects``: above it the bulk delete is a
        Spark job."""
        config = read_properties(self.dir / "config" / "controller-0.properties")
        return int(config.get(FAST_PATH_KEY, DEFAULT_FAST_PATH_MAX_OBJECTS))

    def spark_runs_where(self) -> str:
        master = self.layout.get("spark_master")
        return f"on the Spark master {master}" if master else "in local[*]"

    def engine_log_line(self, topic: str, tiered_epoch: int) -> EngineLine | None:
        """The controllers' last line naming the engine of the bulk delete of ``topic`` below
        ``tiered_epoch`` (the active controller's; a retried job logs one an attempt)."""
        found = None
        for log in sorted((self.dir / "logs").glob("controller-*.log")):
            for line in log.read_text(errors="replace").splitlines():
                match = _ENGINE_LINE.search(line)
                if match and (match.group(2), int(match.group(3))) == (topic, tiered_epoch):
                    found = EngineLine(
                        match.group(1), int(match.group(4)), match.group(5) == "Spark"
                    )
        return found

    def spark_applications(self) -> list[dict[str, Any]]:
        """The Spark master's applications, active and completed, as its web UI's ``/json/``
        lists them (none without a master). A controller keeps its session for the next job:
        its application stays RUNNING until the controller stops."""
        web = self.layout.get("spark_master_web")
        if web is None:
            return []
        state = _get_json(f"{web}/json/")
        apps: list[dict[str, Any]] = [*state.get("activeapps", []), *state.get("completedapps", [])]
        return apps

    def spark_stages(self, app_id: str) -> str:
        """What the Spark REST API (``/api/v1``) tells of an application's stages, asked of the
        master's web UI: the controllers run their driver without a UI (``spark.ui.enabled`` is
        false), so the master is the only one that could answer."""
        url = f"{self.layout['spark_master_web']}/api/v1/applications/{app_id}/stages"
        unreachable = "the driver runs without a UI (spark.ui.enabled=false) and the master"
        try:
            stages = _get_json(url)
        except ValueError:  # a standalone master answers its HTML page to any path
            return f"not shown: {unreachable} serves no REST API ({url})"
        except urllib.error.URLError as e:
            return f"not shown: {unreachable} did not answer {url}: {e}"
        if not isinstance(stages, list):
            return f"not shown: {url} answered {stages!r}"
        done = [s for s in stages if s.get("status") == "COMPLETE"]
        tasks = sum(int(s.get("numCompleteTasks", 0)) for s in stages)
        return f"{len(stages)} stages ({len(done)} complete, {tasks} tasks done)"


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())
