"""The pinclaw runtime core."""

__version__ = "0.1.0"
