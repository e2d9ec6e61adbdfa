"""Platform adapters: the terminal, Telegram and Discord (a package each), and what they share
with the runtime (base, capabilities, text, markers, stream, approvals). Import nothing of
agent/ or tools/."""
