"""Plain-text tables for the terminal: a title line, a header, aligned columns."""
from typing import Iterable, List, Sequence

__all__ = ["render_table", "render_panel"]


def render_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    cells: List[List[str]] = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(row):
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"

    body = [line(row) for row in cells[1:]] or ["| " + "(none)".ljust(len(border) - 4) + " |"]
    return "\n".join([title.center(len(border)).rstrip(), border, line(cells[0]), border, *body, border])


def render_panel(lines: Sequence[str]) -> str:
    width = max((len(text) for text in lines), default=0)
    border = "+" + "-" * (width + 2) + "+"
    return "\n".join([border, *("| " + text.ljust(width) + " |" for text in lines), border])
