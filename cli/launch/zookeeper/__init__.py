"""ZooKeeper 3.8 servers run as plain JVMs from Debian's jars, for tests and for
``tiered-cluster up``: a standalone ``ZooKeeperServer`` and a ``ZooKeeperEnsemble`` of
``QuorumPeer`` members, both on loopback.

``requirements`` says what the JVM needs (and names what is missing), ``process`` runs one JVM
(config, command, ``srvr`` readiness probe; spawn, stop, kill -9, detach and pid file as
``cli.launch.server_launcher`` runs every local server), ``server`` and ``ensemble`` are the two
layouts.
"""

from cli.launch.zookeeper.ensemble import (
    FOLLOWER,
    LEADER,
    QUORUM_MAIN_CLASS,
    PeerPorts,
    QuorumPeer,
    ZooKeeperEnsemble,
)
from cli.launch.zookeeper.process import (
    HOST,
    JVM_FLAGS,
    ZooKeeperProcess,
    four_letter_word,
    server_mode,
)
from cli.launch.zookeeper.requirements import (
    DEFAULT_CLASSPATH,
    JAVA_DIR,
    ZooKeeperError,
    check_requirements,
    find_java,
    missing_requirements,
)
from cli.launch.zookeeper.server import MAIN_CLASS, STANDALONE, ZooKeeperServer, is_serving
from cli.launch.zookeeper.tls import ServerTls

__all__ = [
    "DEFAULT_CLASSPATH",
    "FOLLOWER",
    "HOST",
    "JAVA_DIR",
    "JVM_FLAGS",
    "LEADER",
    "MAIN_CLASS",
    "QUORUM_MAIN_CLASS",
    "STANDALONE",
    "PeerPorts",
    "QuorumPeer",
    "ServerTls",
    "ZooKeeperEnsemble",
    "ZooKeeperError",
    "ZooKeeperProcess",
    "ZooKeeperServer",
    "check_requirements",
    "find_java",
    "four_letter_word",
    "is_serving",
    "missing_requirements",
    "server_mode",
]
