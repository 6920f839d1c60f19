"""KRaft-shaped Raft: a pure core (`core.py`) and the pieces it needs.

See core.py for the theory of operation. Nothing in this package reads a
clock or a socket except `state.py`'s quorum-state file helpers and the
log adapter, which the shell calls.
"""
