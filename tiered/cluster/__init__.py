"""Cluster metadata shared by the controller and the brokers: topics with their tiered state and
epoch, broker registrations, the image both sides derive from the metadata records, and the
ZooKeeper paths of docs/design.md §3.1."""
