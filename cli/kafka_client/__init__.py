"""A small Kafka protocol client for the tools (``tiered-consumer-groups``): connections with
TLS and SCRAM, metadata and offsets, the group admin APIs."""
