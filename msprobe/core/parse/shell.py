"""The `Parse >>>` interactive session: one command per line, each with its own options and help.

Commands: pt (show a tensor file), cn (compare two tensor files), pk (look up an API in a dump), vc (batch
compare of two directories), dc / cad (Ascend kernel dumps: need CANN's msaccucmp), run (run a program),
help, exit. A wrong option or `-h` prints the usage and the session goes on; end of input (Ctrl+D, or the
end of a piped script) ends it with status 0. Only `run` starts a program: an unknown command is an error.
"""
import argparse
import cmd
import functools
import os
import shlex
import subprocess
import sys

import numpy as np

from msprobe.core.errors import MsprobeError
from msprobe.core.parse.batch_compare import batch_compare, tensor_files
from msprobe.core.parse.dump_lookup import lookup_api, render_lookup
from msprobe.core.parse.tensor_compare import compare_tensors, render_comparison, save_as_text
from msprobe.core.parse.tensor_file import describe, read_tensor_file
from msprobe.core.terminal import table_text
from msprobe.core.paths import check_path

__all__ = ["ParseShell", "run_shell"]

MSACCUCMP = "/usr/local/Ascend/ascend-toolkit/latest/tools/operator_cmp/compare/msaccucmp.py"
PREVIEW_ROWS, PREVIEW_COLUMNS = 16, 8


class _UsageError(Exception):
    """An option error; the message already holds the usage."""


class _HelpShown(Exception):
    """`-h` printed the help."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that reports instead of exiting, so the session survives `-h` and typos."""

    def error(self, message):
        raise _UsageError(f"{self.format_usage().rstrip()}\n{self.prog}: error: {message}")

    def exit(self, status=0, message=None):
        if message:
            raise _UsageError(message.rstrip())
        raise _HelpShown()


def _parser(name: str, description: str) -> _Parser:
    return _Parser(prog=name, description=description, add_help=True)


def _build_parsers():
    parsers = {}
    p = parsers["pt"] = _parser("pt", "Show a tensor file (.npy or .pt): values, shape, dtype, max, min, mean; "
                                      "saves FILE.txt beside it.")
    p.add_argument("-n", "--name", required=True, help="tensor file")
    p = parsers["cn"] = _parser("cn", "Compare two tensor files element by element.")
    p.add_argument("-m", "--my_data", required=True, help="tensor file under test")
    p.add_argument("-g", "--golden", required=True, help="golden tensor file")
    p.add_argument("-p", "--print_num", type=int, default=20, help="rows of the error and top tables (default 20)")
    p.add_argument("-al", "--atol", type=float, default=0.001, help="absolute tolerance (default 0.001)")
    p.add_argument("-rl", "--rtol", type=float, default=0.001, help="relative tolerance (default 0.001)")
    p.add_argument("-s", "--save", action="store_true", help="also save both tensors as .txt beside them")
    p = parsers["pk"] = _parser("pk", "Show the statistics and the stack of an API in a dump.json (or old .pkl).")
    p.add_argument("-f", "--file", required=True, help="dump.json (stack.json is read from the same folder) or .pkl")
    p.add_argument("-n", "--name", required=True, help="API name, e.g. Functional.linear.0.forward")
    p = parsers["vc"] = _parser("vc", "Compare two directories of tensor files pair by pair into a CSV.")
    p.add_argument("-m", "--my_dump_path", required=True, help="directory under test")
    p.add_argument("-g", "--golden_dump_path", required=True, help="golden directory")
    p.add_argument("-out", "--output_path", default=os.path.join("parse_data", "acl_batch_compare"),
                   help="output directory (default ./parse_data/acl_batch_compare)")
    p.add_argument("-cmp_path", "--msaccucmp_path", default=MSACCUCMP, help="CANN's msaccucmp.py (kernel dumps)")
    p = parsers["dc"] = _parser("dc", "Convert Ascend kernel dump files to .npy (needs CANN's msaccucmp).")
    p.add_argument("-n", "--name", required=True, help="kernel dump file or directory")
    p.add_argument("-f", "--format", help="target format, e.g. NCHW")
    p.add_argument("-out", "--output_path", default=os.path.join("parse_data", "convert_result"))
    p.add_argument("-cmp_path", "--msaccucmp_path", default=MSACCUCMP)
    p = parsers["cad"] = _parser("cad", "Batch-convert an Ascend kernel dump directory (needs CANN's msaccucmp).")
    p.add_argument("-m", "--my_dump_path", required=True, help="kernel dump directory (device id level)")
    p.add_argument("-out", "--output_path", default=os.path.join("parse_data", "acl_batch_convert"))
    p.add_argument("-asc", "--msaccucmp_path", default=MSACCUCMP)
    return parsers


def _command(name):
    """Wrap `do_<name>`: parse its options, print errors as one line, keep the session alive."""
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, line):
            try:
                args = self.parsers[name].parse_args(shlex.split(line))
                method(self, args)
            except _HelpShown:
                pass
            except _UsageError as exc:
                self._say(str(exc))
            except MsprobeError as exc:
                self._say(f"[ERROR] {exc}")
            except ValueError as exc:  # shlex: unbalanced quotes
                self._say(f"[ERROR] {exc}")
            except Exception as exc:  # the session must survive any bad input
                self._say(f"[ERROR] {name} failed: {type(exc).__name__}: {exc}")
            return False
        wrapper.__doc__ = None
        return wrapper
    return decorate


def _preview(array: np.ndarray, styled: bool = False) -> str:
    if array.ndim == 0:
        return f"value: {array.item()}"
    width = array.shape[-1] if array.ndim >= 2 else PREVIEW_COLUMNS
    rows = array.reshape(-1)[: PREVIEW_ROWS * width].reshape(-1, width) if array.ndim < 2 else \
        array.reshape(-1, width)[:PREVIEW_ROWS]
    shown = rows[:, :PREVIEW_COLUMNS]
    headers = ["row"] + [str(i) for i in range(shown.shape[1])]
    body = [[r] + [f"{v:.6g}" if np.issubdtype(type(v), np.floating) else str(v) for v in row]
            for r, row in enumerate(shown.tolist())]
    return table_text(f"first {len(body)} x {shown.shape[1]} values", headers, body, styled=styled)


class ParseShell(cmd.Cmd):
    """The interactive session; `onecmd(line)` runs one line (what the tests drive)."""

    prompt = "Parse >>> "
    intro = "msprobe parse: 'help' lists the commands, 'help CMD' or 'CMD -h' explains one; Ctrl+D or 'exit' leaves."

    def __init__(self, stdin=None, stdout=None):
        super().__init__(stdin=stdin, stdout=stdout)
        self.parsers = _build_parsers()

    @property
    def _styled(self) -> bool:
        """Terminal styles only when the session talks to a terminal; plain ASCII to a pipe or file."""
        return bool(getattr(self.stdout, "isatty", lambda: False)())

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    # ---- the commands ------------------------------------------------------------------------------
    @_command("pt")
    def do_pt(self, args):
        tensor = read_tensor_file(args.name)
        text = save_as_text(tensor)
        self._say("\n".join([_preview(tensor.array, self._styled), describe(tensor), f"Path: {tensor.path}",
                             f"TextFile: {text}"]))

    @_command("cn")
    def do_cn(self, args):
        if args.print_num < 0:
            raise _UsageError("cn: -p must be 0 or more.")
        left, right = read_tensor_file(args.my_data), read_tensor_file(args.golden)
        result = compare_tensors(left, right, args.print_num, args.atol, args.rtol)
        text_files = {"Left": save_as_text(left), "Right": save_as_text(right)} if args.save else None
        self._say(render_comparison(result, text_files, self._styled))

    @_command("pk")
    def do_pk(self, args):
        self._say(render_lookup(lookup_api(args.file, args.name), args.name))

    @_command("vc")
    def do_vc(self, args):
        my_dir = check_path(args.my_dump_path, kind="dir", what="-m")
        if not tensor_files(my_dir):
            self._say(f"[ERROR] vc: '{my_dir}' holds no .npy/.pt files; comparing Ascend kernel dumps needs CANN's "
                      f"msaccucmp.py ({args.msaccucmp_path}), which msprobe does not run for you.")
            return
        path = batch_compare(my_dir, args.golden_dump_path, args.output_path)
        self._say(f"[INFO] Compare result is saved in: {path}")

    @_command("dc")
    def do_dc(self, args):
        self._say(f"[ERROR] dc converts Ascend kernel dump files with CANN's msaccucmp.py ({args.msaccucmp_path}), "
                  f"which is not part of msprobe; with CANN installed: run python3 {args.msaccucmp_path} convert "
                  f"-d {args.name} -out {args.output_path}")

    @_command("cad")
    def do_cad(self, args):
        self._say(f"[ERROR] cad converts Ascend kernel dump directories with CANN's msaccucmp.py ({args.msaccucmp_path}), "
                  f"which is not part of msprobe; with CANN installed: run python3 {args.msaccucmp_path} convert "
                  f"-d {args.my_dump_path} -out {args.output_path}")

    def do_run(self, line):
        """run PROGRAM [ARGS...]: run a program (no shell), e.g. `run ls -l`."""
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            self._say(f"[ERROR] {exc}")
            return False
        if not argv:
            self._say("usage: run PROGRAM [ARGS...]")
            return False
        try:
            done = subprocess.run(argv, check=False)
        except OSError as exc:
            self._say(f"[ERROR] cannot run {argv[0]}: {exc.strerror}")
            return False
        if done.returncode:
            self._say(f"[INFO] {argv[0]} exited with status {done.returncode}")
        return False

    def do_exit(self, line):
        """exit: leave the session (so do 'quit' and Ctrl+D)."""
        return True

    do_quit = do_exit

    def do_EOF(self, line):  # noqa: N802 - cmd's name for the end of input
        self._say("")
        return True

    # ---- everything else ---------------------------------------------------------------------------
    def emptyline(self):
        return False  # cmd's default repeats the last command

    def default(self, line):
        word = line.split()[0] if line.split() else line
        self._say(f"[ERROR] unknown command '{word}'; 'help' lists the commands, 'run {line}' runs it as a program.")
        return False

    def do_help(self, arg):
        """help [CMD]: list the commands, or explain one."""
        name = arg.strip()
        if name in self.parsers:
            self._say(self.parsers[name].format_help().rstrip())
        elif name in ("run", "exit", "quit", "help"):
            self._say(getattr(self, f"do_{name}").__doc__)
        elif name:
            self._say(f"[ERROR] no command '{name}'.")
        else:
            rows = [(n, p.description) for n, p in self.parsers.items()]
            rows += [("run", "Run a program (no shell), e.g. run ls -l."), ("exit", "Leave (also quit, Ctrl+D).")]
            self._say(table_text("commands", ("command", "what it does"), rows, styled=self._styled))
        return False


def run_shell(stdin=None, stdout=None) -> int:
    """Run the session until exit or end of input; returns 0."""
    shell = ParseShell(stdin=stdin, stdout=stdout)
    if stdin is not None:
        shell.use_rawinput = False
    try:
        shell.cmdloop()
    except KeyboardInterrupt:
        (stdout or sys.stdout).write("\n")
    return 0
