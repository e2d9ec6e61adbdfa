"""OS sandboxes for commands (bubblewrap, Landlock) and the reapers that make sure nothing a
command starts outlives it. May import the tools core only."""
