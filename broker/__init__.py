"""The broker agent: local log, RemoteLogManager with its task pools, servicer."""
