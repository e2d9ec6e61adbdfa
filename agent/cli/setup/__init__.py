"""`agent init`'s first setup: the questions, the checks of the model and the bot tokens, and
the files written (config.toml, agent.env)."""
