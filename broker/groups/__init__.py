"""Kafka's classic consumer groups on a broker: membership (join, sync, heartbeat, leave, the
group state machine) and committed offsets, kept as acknowledged data in the compacted internal
topic ``__consumer_offsets``, whose partition a group maps to makes its leader the group's
coordinator (``placement``)."""
