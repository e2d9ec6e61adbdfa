"""Sub-agents as durable jobs: the delegate tool, the runner that runs each job with the
minimal prompt and delivers its result once, and the words /jobs and `agent jobs` show.
Part of the runtime floor (imports the floors below it)."""
