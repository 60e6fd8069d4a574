"""Write one self-contained HTML file that shows a `.vis` document: no server, no network, opens from disk.

The viewer's HTML, JS and CSS are package data (msprobe/visualization/viewer/) inlined into the page
together with the graph JSON; its Content-Security-Policy forbids every external load.
"""
import json
import os
from html import escape

from msprobe.core.paths import FILE_MODE, atomic_write_text

__all__ = ["render_html", "write_html"]

_VIEWER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer")


def _asset(name: str) -> str:
    with open(os.path.join(_VIEWER_DIR, name), encoding="utf-8") as handle:
        return handle.read()


def _script_safe(text: str) -> str:
    """Our own JS placed inside <script>: no '</' (would close the tag) and no '<!--'."""
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _json_in_script(document: dict) -> str:
    """The document as JSON that no '<' inside a string can cut short: '<' becomes the JSON escape \\u003c,
    which JSON.parse reads back as '<' (a '<\\!--' escape would not be JSON at all)."""
    text = json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c")


def render_html(document: dict, title: str = "msprobe graph") -> str:
    data = _json_in_script(document)
    page = _asset("viewer.html")
    # data last: it may contain any placeholder text
    for key, value in (("__TITLE__", escape(title)), ("__CSS__", _asset("viewer.css")),
                       ("__JS__", _script_safe(_asset("viewer.js")))):
        page = page.replace(key, value)
    return page.replace("__DATA__", data, 1)


def write_html(path: str, document: dict, title: str = "msprobe graph") -> str:
    atomic_write_text(path, render_html(document, title), mode=FILE_MODE)
    return os.path.abspath(path)
