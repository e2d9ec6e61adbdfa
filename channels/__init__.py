"""Platform adapters: the terminal, Telegram and Discord."""
