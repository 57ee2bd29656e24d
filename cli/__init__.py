"""The operator's tools: console scripts shaped like kafka-topics.sh, kafka-configs.sh,
kafka-acls.sh and kafka-consumer-groups.sh, the console producer and consumer, and
``tiered-cluster`` with the launchers of what a local cluster stands on (``cli.launch``)."""
