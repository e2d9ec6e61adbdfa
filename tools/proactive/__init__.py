"""The schedule and pin-watch tools and what a `when` means. May import the tools core and
tools.board."""
