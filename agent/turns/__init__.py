"""One turn: the channel's prompt, the user's envelope, the tool-call loop, its dispatchers
(native and text tool calls) and what a final reply may not do. May import agent.durable,
agent.model, agent.prompt and the core; it knows no channel runtime."""
