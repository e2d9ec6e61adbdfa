"""Telegram (python-telegram-bot): long polling, what a message means, replies, approvals.
May import the channels core only."""
