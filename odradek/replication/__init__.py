"""Partition replication as pure state: what leaders and followers decide.

Nothing here reads a clock, a socket or a file: times, offsets and epoch
caches are arguments. The broker's asyncio shell drives it
(`replication/leader_replication.py` on the leader, `broker/replica_fetcher.py` and
`broker/handlers/replica_fetch.py` on the wire), and so does the deterministic
simulator (`tests/simulation/replication.py`), so the rules checked under
seeded faults are the rules the broker runs.
"""
