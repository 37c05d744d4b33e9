"""The public objects: Orchestrator, its session, the Trial handle."""
