"""Tables and summaries on the terminal through `rich`: styled on a terminal, plain ASCII when piped or logged."""
import sys
from typing import Iterable, Optional, Sequence, TextIO

__all__ = ["print_table", "table_text", "panel_text"]


def _console(stream: TextIO, width: Optional[int] = None):
    from rich.console import Console

    terminal = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=stream, force_terminal=terminal, no_color=not terminal, highlight=False, soft_wrap=False,
                   width=width or (None if terminal else 200)), terminal


def _table(title: str, headers: Sequence[str], rows: Iterable[Sequence[object]], terminal: bool, styles=None):
    from rich import box
    from rich.table import Table

    table = Table(title=title or None, box=box.SIMPLE_HEAVY if terminal else box.ASCII2, title_justify="left")
    for header in headers:
        table.add_column(str(header), overflow="fold")
    for n, row in enumerate(rows):
        table.add_row(*("" if cell is None else str(cell) for cell in row),
                      style=(styles[n] if styles and n < len(styles) else None) if terminal else None)
    if not table.row_count:
        table.add_row(*(["(none)"] + [""] * (len(headers) - 1)))
    return table


def print_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[object]], stream: Optional[TextIO] = None,
                styles: Optional[Sequence[Optional[str]]] = None) -> None:
    """Print one table to `stream` (stdout): `styles` gives a rich style per row ("red", "yellow"), used only on a
    terminal, where the row's words already say what the colour does."""
    console, terminal = _console(stream or sys.stdout)
    console.print(_table(title, headers, rows, terminal, styles))


def _render(renderable_of, styled: bool, width: int) -> str:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=styled, no_color=not styled, highlight=False, soft_wrap=False,
                      width=width)
    console.print(renderable_of(styled))
    return buffer.getvalue().rstrip("\n")


def table_text(title: str, headers: Sequence[str], rows: Iterable[Sequence[object]], width: int = 200,
               styled: bool = False) -> str:
    """The table as text: plain ASCII (logs, files, pipes), or with terminal styles when `styled`."""
    rows = list(rows)
    return _render(lambda fancy: _table(title, headers, rows, fancy), styled, width)


def panel_text(lines: Sequence[str], width: int = 200, styled: bool = False) -> str:
    """Lines in a box, as text (see table_text)."""
    from rich import box
    from rich.panel import Panel
    from rich.text import Text

    body = Text("\n".join(lines))
    return _render(lambda fancy: Panel(body, box=box.ROUNDED if fancy else box.ASCII, expand=False), styled, width)
