"""The durable layer's second store: the same tables in PostgreSQL, for several processes."""
