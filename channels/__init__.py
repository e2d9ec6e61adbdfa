"""Platform adapters: the terminal, Telegram and Discord (a package each), and what they share
with the runtime (base, capabilities, text, markers, stream, approvals); each chat channel's
facts (its package's kind.py, channels/kind.py) and the registry that lists them
(channels/registry.py). Import nothing of agent/ or tools/."""
