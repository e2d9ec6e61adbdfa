"""`agent chat`: the loop of lines and turns, the views (plain, and prompt_toolkit with rich on
a terminal), and the two ways a turn is answered (the running daemon, or this process)."""
