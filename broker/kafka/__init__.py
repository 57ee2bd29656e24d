"""The broker's Kafka wire-protocol APIs: kio requests in, kio responses out, with the admin
requests forwarded to the active controller (``handler.BrokerKafkaHandler`` composes them)."""
