"""The reference written from the code: every config key from the settings models (their
docstrings are the descriptions), config.example.toml the same way, and every command's
--help text (`agent reference` writes them; tests/test_reference.py compares)."""
