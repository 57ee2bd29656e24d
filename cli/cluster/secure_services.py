"""``tiered-cluster up --secure``: the services' part (docs/operations/security.md#s3 and #spark),
beside :mod:`cli.cluster.secure` (the daemons' TLS, principals and ZooKeeper identity). Under
``DIR/config``:

- ``s3.pem``, ``s3.key``: the S3 endpoint's certificate from the cluster CA (subject alternative
  names 127.0.0.1, localhost and, with ``--loopback-hosts``, its own address); the endpoint
  serves HTTPS and every controller and broker (and the bulk delete's executors) verifies it
  with ``remote.storage.s3.ca.file`` = the CA's ``ca.pem``;
- ``spark.secret``: the Spark cluster's secret (mode 600), named in the controllers'
  ``bulk.delete.spark.authenticate.secret.file``; the master and workers read it from
  ``spark-conf/spark-defaults.conf`` (mode 600, their ``SPARK_CONF_DIR``) with authentication,
  encrypted RPC and redaction on (:mod:`tiered.security.spark_auth`). Brokers hold neither.

Each file is written unless it is there already, as :func:`cli.cluster.secure.write_files` does.
"""

from __future__ import annotations

from pathlib import Path

from cli.cluster import secure
from cli.cluster.daemons import ClusterFiles
from cli.cluster.layout import Layout
from cli.cluster.spec import S3
from cli.launch.s3_endpoint import EndpointTls
from cli.launch.spark_standalone import write_spark_defaults
from cli.security.certs import CertificateAuthority, write_private_file
from tiered.rsm.s3 import CA_FILE_CONFIG
from tiered.security.spark_auth import (
    SECRET_FILE_CONFIG,
    generate_secret,
    read_secret,
    secured_settings,
)

__all__ = [
    "controller_properties",
    "endpoint_tls",
    "lay_out",
    "s3_properties",
    "spark_conf_dir",
    "spark_secret_file",
    "write_files",
]

_HTTP = "http://"
_HTTPS = "https://"


def _has_s3(layout: Layout) -> bool:
    return secure.is_secure(layout) and "s3_endpoint" in layout


def _has_spark(layout: Layout) -> bool:
    return secure.is_secure(layout) and "spark_master" in layout


def lay_out(layout: Layout) -> None:
    """A new secure cluster's S3 endpoint serves HTTPS."""
    endpoint = layout.get("s3_endpoint")
    if endpoint is not None and endpoint.startswith(_HTTP):
        layout["s3_endpoint"] = _HTTPS + endpoint.removeprefix(_HTTP)


def spark_secret_file(files: ClusterFiles) -> Path:
    return files.config_file("spark", "secret")


def spark_conf_dir(files: ClusterFiles, layout: Layout) -> Path | None:
    """The Spark master's and workers' ``SPARK_CONF_DIR`` in a secure cluster, else None."""
    return files.dir / "config" / "spark-conf" if _has_spark(layout) else None


def _s3_certificate(files: ClusterFiles) -> tuple[Path, Path]:
    return files.config_file(S3, "pem"), files.config_file(S3, "key")


def endpoint_tls(files: ClusterFiles, layout: Layout) -> EndpointTls | None:
    """What the S3 endpoint of a secure cluster serves, None otherwise."""
    if not _has_s3(layout):
        return None
    certificate, key = _s3_certificate(files)
    return EndpointTls(certificate, key, secure.ca_file(files))


def write_files(files: ClusterFiles, layout: Layout) -> None:
    """The S3 endpoint's certificate and the Spark secret with the daemons' conf, after
    :func:`cli.cluster.secure.write_files` (whose CA issues the certificate)."""
    if _has_s3(layout) and not all(p.exists() for p in _s3_certificate(files)):
        ca = CertificateAuthority.load(secure.ca_file(files), files.config_file("ca", "key"))
        secure.issue_certificate(ca, layout, S3).write_pem_files(files.dir / "config", S3)
    conf_dir = spark_conf_dir(files, layout)
    if conf_dir is not None:
        if not spark_secret_file(files).exists():
            write_private_file(spark_secret_file(files), f"{generate_secret()}\n".encode())
        write_spark_defaults(conf_dir, secured_settings(read_secret(spark_secret_file(files))))


def s3_properties(files: ClusterFiles, layout: Layout) -> dict[str, str]:
    """What a controller or broker adds to reach a secure cluster's S3 endpoint."""
    return {CA_FILE_CONFIG: str(secure.ca_file(files))} if _has_s3(layout) else {}


def controller_properties(files: ClusterFiles, layout: Layout) -> dict[str, str]:
    """What a controller adds to drive a secure cluster's Spark."""
    return {SECRET_FILE_CONFIG: str(spark_secret_file(files))} if _has_spark(layout) else {}
