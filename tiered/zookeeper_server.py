"""The standalone ZooKeeper server's old import path, kept for its users: the code lives in the
``tiered.zookeeper`` package (``server``, ``process``, ``requirements``; ``ensemble`` for three
servers)."""

from tiered.zookeeper.process import HOST, JVM_FLAGS, four_letter_word
from tiered.zookeeper.requirements import (
    DEFAULT_CLASSPATH,
    JAVA_DIR,
    ZooKeeperError,
    check_requirements,
    find_java,
    missing_requirements,
)
from tiered.zookeeper.server import MAIN_CLASS, ZooKeeperServer, is_serving

__all__ = [
    "DEFAULT_CLASSPATH",
    "HOST",
    "JAVA_DIR",
    "JVM_FLAGS",
    "MAIN_CLASS",
    "ZooKeeperError",
    "ZooKeeperServer",
    "check_requirements",
    "find_java",
    "four_letter_word",
    "is_serving",
    "missing_requirements",
]
