"""One turn of a chat: the channel runtime, the tool-call loop and its dispatchers, chat
commands, reply media and the session store. May import agent.prompt, agent.llm and below."""
