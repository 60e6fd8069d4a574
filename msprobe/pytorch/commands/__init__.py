"""`msprobe -f pytorch <subcommand>` modules: each defines DESCRIPTION, add_arguments(parser) and run(args)."""
