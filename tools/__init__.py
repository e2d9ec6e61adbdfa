"""What the agent can do: shell, files, memory and hardware tools, and the policy around them."""
