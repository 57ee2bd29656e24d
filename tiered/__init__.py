"""The tiered control plane library: plugin API, configs, errors, RLMM, RSM, RPC stubs."""
