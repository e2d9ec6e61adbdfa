"""Discord (discord.py): gateway events, replies, approvals. May import the channels core only."""
