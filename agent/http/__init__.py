"""HTTP in: the daemon's aiohttp server (`[http]`) and what it serves: signed webhooks
(`[http.hooks.NAME]`) turned into inbox messages. A floor between the composition root and
the daemon: it may import the core and every floor up to `agent/app.py`; its settings model
(`config.py`) is core, imported by `agent/config.py`, and imports nothing of ours."""
