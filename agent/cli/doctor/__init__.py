"""`agent doctor`: the whole setup checked, each problem with its fix in the same line."""
