"""Console scripts in the style of kafka-topics.sh and kafka-configs.sh."""
