"""state.db itself: the connection, the schema's migrations, the disk's health, the backups."""
