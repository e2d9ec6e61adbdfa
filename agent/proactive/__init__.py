"""Turns nobody typed: the scheduler and the heartbeat, the pin watcher, and the books the
schedule and watch tools write in. They reach a channel through Enqueue
(agent/runtime/enqueue.py). May import agent.runtime and below."""
