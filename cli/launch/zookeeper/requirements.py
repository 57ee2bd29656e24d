"""What a ZooKeeper JVM needs on this machine (java and Debian's jars) and the error every
launcher of the package raises.

The servers use the jars of Debian's ``zookeeper`` package (``/usr/share/java``;
``scripts/ensure_env.sh`` installs it with a headless JRE and ``libslf4j-java``) plus
``slf4j-simple.jar`` as the logging binding. ``zookeeper.jar``'s manifest ``Class-Path`` pulls in
the rest (zookeeper-jute, netty, jetty, jackson, metrics, slf4j-api, ...).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "DEFAULT_CLASSPATH",
    "ENSURE_ENV_HINT",
    "JAVA_DIR",
    "ZooKeeperError",
    "check_requirements",
    "find_java",
    "missing_requirements",
]

JAVA_DIR = Path("/usr/share/java")
DEFAULT_CLASSPATH: tuple[Path, ...] = (
    JAVA_DIR / "zookeeper.jar",
    JAVA_DIR / "slf4j-simple.jar",
)
ENSURE_ENV_HINT = (
    "run scripts/ensure_env.sh (it installs Debian's zookeeper, default-jre-headless and "
    "libslf4j-java)"
)


class ZooKeeperError(RuntimeError):
    """A ZooKeeper server could not be started or stopped, or cannot run on this machine."""


def find_java(java: str | None = None) -> str | None:
    """The java executable: ``java`` if given, else ``$JAVA_HOME/bin/java``, else ``java`` on
    ``PATH``; ``None`` if there is none."""
    if java is not None:
        return java if Path(java).is_file() or shutil.which(java) else None
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def missing_requirements(
    java: str | None = None, classpath: Sequence[Path | str] = DEFAULT_CLASSPATH
) -> list[str]:
    """What a ZooKeeper server needs and this machine lacks: java and/or jars (empty if none)."""
    missing = [] if find_java(java) else [f"java ({java or 'not in $JAVA_HOME/bin nor on PATH'})"]
    missing += [str(p) for p in classpath if not Path(p).is_file()]
    return missing


def check_requirements(
    java: str | None = None, classpath: Sequence[Path | str] = DEFAULT_CLASSPATH
) -> None:
    """Raise ``ZooKeeperError`` naming what is missing and ``scripts/ensure_env.sh``."""
    missing = missing_requirements(java, classpath)
    if missing:
        raise ZooKeeperError(
            f"cannot run ZooKeeper: missing {', '.join(missing)}; {ENSURE_ENV_HINT}"
        )
