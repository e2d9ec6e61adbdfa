"""Whose conversation a message is and what of it a turn sends: memory scopes, auto-recall,
compaction. May import agent.durable, agent.model and the core."""
