"""Generated protobuf and gRPC code (regenerate with `make proto`)."""
