"""The system prompt: its context, the default sections, skills, AIEOS identities, and the
builder with its budget. May import agent.config, agent.workspace, channels and tools."""
