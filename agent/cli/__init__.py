"""The `agent` command: click commands and the thin clients of the daemon's socket. The top
floor: may import anything; heavy modules only inside the command that needs them."""
