"""What the agent can do. The core, flat here: the Tool protocol and registry (base), the
settings (config), the one path resolver (paths), the policy, who sees what (boundaries) and
the file tools. Rooms: shell, sandbox, board, memory, proactive, skills. Import nothing of
agent/ or channels/."""
