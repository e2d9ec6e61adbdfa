"""The channel runtime: messages into the inbox, one worker per chat, turns run, replies
queued and sent by the courier; intake, attachments, media, approvals, chat commands and
the one-shot answer. May import agent.turns, agent.conversation and below."""
