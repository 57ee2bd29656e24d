"""Kafka's classic consumer groups on the broker: which members a group has, which generation
and protocol they agreed on, and the rebalances between (``coordinator``, on the state table of
``group_state``), plus where committed offsets live and which broker coordinates a group (the
offsets side). The Kafka wire APIs over them are in ``broker.kafka``."""
