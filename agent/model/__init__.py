"""The model: one client (retries, fallbacks, streaming, usage) that calls a model served
directly in OpenAI's protocol over httpx and every other one through LiteLLM; what pinclaw
knows of a model (profiles/); what a model's own server says. May import agent.config."""
