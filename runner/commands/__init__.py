"""The commands: CLI, library, demo, reporting, import, check, plan, agreement."""
