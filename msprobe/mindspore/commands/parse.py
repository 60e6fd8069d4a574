"""`msprobe -f FRAMEWORK parse`: the interactive session that shows, compares and looks up dumped tensors."""

DESCRIPTION = ("Interactive tool: show a tensor file (pt), compare two (cn), look up an API in a dump (pk), "
               "compare two directories (vc). Type 'help' inside.")


def add_arguments(parser):
    """The session takes no options: everything happens at its prompt."""


def run(args):
    from msprobe.core.parse.shell import run_shell

    return run_shell()
