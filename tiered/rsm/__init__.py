"""RemoteStorageManager implementations (fsspec-backed, LocalTieredStorage-like layout)."""
