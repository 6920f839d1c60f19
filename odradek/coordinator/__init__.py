"""Group coordinator: a pure state machine over `__consumer_offsets` plus its asyncio shell.

- `records.py`   Kafka's key/value formats of `__consumer_offsets` records.
- `classic.py`   the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) per group.
- `consumer.py`  KIP-848 consumer groups (ConsumerGroupHeartbeat) per group.
- `assignors.py` the server-side assignors of KIP-848 (`uniform`, `range`).
- `core.py`      the coordinator: groups, offsets, partitions it owns, replay, expiry.
- `service.py`   the asyncio shell: writes records to the partition logs, wakes
                 waiting requests, runs the timers.
"""
