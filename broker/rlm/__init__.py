"""The broker's RemoteLogManager: copier, expiration and reader pools over the RLMM and RSM."""
