"""Tools from MCP servers: their settings (config), a local server started in the OS sandbox
(stdio), the link to one server through the official SDK (link), their tools as pinclaw tools
with whom they trust (tool, schemas, results), and the manager that keeps the registry in step
with them. May import the tools core and tools/sandbox/."""
