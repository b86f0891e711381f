"""The agent: reports its host to the master, heartbeats, and runs the activities it is told to.

facts (the host), runner (real processes) and light (none), statefile (what runs, across
restarts), link (the master's URLs and leader), loop (the protocol), launch (one or N agents).
"""
