"""Subcommands that are the same for every framework (the CLI lists them with each framework's own)."""
