"""The Kafka wire protocol: record batches v2, request/response codec (kio) and a TCP server.

``server.KafkaServer`` serves a ``handler.KafkaHandler`` on one listener; the broker mounts it.
"""
