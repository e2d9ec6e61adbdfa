"""What pinclaw knows about models, in one place: the built-in entries per family
(builtin.py: a new quirk is one entry in its table), the one lookup that lays what was
learned over them (lookup.profile_for; the learned facts are kept by
agent/durable/learned_model_facts.py and handed in as plain data), how open models write
tool calls as text (text_call_formats.py, text_call_values.py), which way a model's calls
go (routes.py) and what LiteLLM knows of it (litellm_facts.py, litellm_import.py, and its
table read as data, litellm_map.py)."""
