"""The broker's Kafka listener: sockets and framing, TLS, SASL, the versions served, and the
contract between the listener and the broker's APIs (``handler``)."""
