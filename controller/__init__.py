"""The controller daemon: metadata stores, tiered-state machine, disablement queue."""
