"""state.db and what must survive a crash: the connection, the schema versions, one module
per table (inbox, outbox, sessions, schedules, tool journal, quirks, always-allowed), its
health and its backups. May import agent.model, agent.prompt and the core."""
