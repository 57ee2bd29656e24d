"""Which configs hold a secret or say where one is: a describe shows them as null with
``is_sensitive`` (as Kafka does for its PASSWORD-typed configs), and nothing logs their values.

A key is sensitive when it is one of ``SENSITIVE_KEYS``, or ends with one after a listener or
mechanism prefix (Kafka's ``listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config``), or names
one of ``SENSITIVE_WORDS`` (a plugin's own keys: ``rsm.config.s3.secret.key``).
"""

from __future__ import annotations

__all__ = ["SENSITIVE_KEYS", "SENSITIVE_WORDS", "is_sensitive_config"]

SENSITIVE_KEYS = frozenset(
    {
        # Kafka's PASSWORD-typed security configs
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.credentials.client.secret",
        "delegation.token.secret.key",
        "password.encoder.secret",
        "password.encoder.old.secret",
        # where the secrets of the S3 storage and of ZooKeeper are
        "remote.storage.s3.credentials.file",
        "remote.storage.s3.credentials.profile",
        "zookeeper.jaas.config.file",
    }
)
SENSITIVE_WORDS = ("password", "secret", "sasl.jaas", "credentials", "access.key", "session.token")


def is_sensitive_config(name: str) -> bool:
    key = name.strip().lower()
    if any(key == s or key.endswith("." + s) for s in SENSITIVE_KEYS):
        return True
    return any(word in key for word in SENSITIVE_WORDS)
