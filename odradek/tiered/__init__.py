"""Tiered storage (KIP-405): the remote storage manager over fsspec, the topic-based
remote log metadata manager and the RemoteLogManager that copies closed segments,
applies retention across both tiers and serves reads below the local log start."""
