"""Turns nobody typed: the scheduler and the heartbeat, the pin watcher, and the books the
schedule and watch tools write in. They go through ChannelRuntime's entry points. May
import agent.runtime and below."""
