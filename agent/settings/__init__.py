"""The agent's own sections of config.toml (plain pydantic, light): the model's [llm], the
turns' [agent], and the smaller tables. Each key's docstring is its description, the one
source of the configuration reference (`agent reference`); agent/config.py assembles them."""
