"""The broker daemon, built by ``broker.broker.Broker``: hosting, the local log, the
RemoteLogManager with its task pools, the data plane, the gRPC and Kafka edges."""
