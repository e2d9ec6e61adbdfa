"""The model: LiteLLM behind one client (retries, fallbacks, streaming, usage), what LiteLLM
knows of a model, and what a model's own server says. May import agent.config and
agent.prompt."""
