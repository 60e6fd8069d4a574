"""Drift heatmaps of a trend store: step × rank (columns) × module (rows), as PNG and a self-contained HTML.

Drift of one (step, rank, module) = the largest relative change of one statistic (default: norm) of any of
the module's tensors against the same tensor on the same rank at the store's first step:
|v - v0| / max(|v0|, 1e-12); a non-finite value is infinite drift. Modules are rows in the order they first
ran; columns are step-major (step 0 rank 0, step 0 rank 1, ...). The first cell over `threshold`, in step,
then execution, then rank order, is where the job starts to drift.
"""
import base64
import html
import io
import math
import os
from typing import Any, Dict, Optional

import numpy as np

from msprobe.core.paths import atomic_write_bytes, atomic_write_text

__all__ = ["drift_table", "drift_matrix", "first_drift", "write_heatmaps"]

_DRIFT_SQL = """
WITH first AS (SELECT min(step) AS step FROM stats WHERE stat = $stat),
base AS (SELECT s.rank, s.tensor, s.value AS v0 FROM stats s, first WHERE s.stat = $stat AND s.step = first.step),
ordered AS (SELECT module, min(rowid) AS first_seen FROM stats GROUP BY module)
SELECT s.step, s.rank, s.module, o.first_seen,
       max(CASE WHEN NOT isfinite(s.value) OR NOT isfinite(b.v0) THEN 'inf'::DOUBLE
                ELSE abs(s.value - b.v0) / greatest(abs(b.v0), 1e-12) END) AS drift
FROM stats s JOIN base b ON s.rank = b.rank AND s.tensor = b.tensor JOIN ordered o ON s.module = o.module
WHERE s.stat = $stat
GROUP BY s.step, s.rank, s.module, o.first_seen
ORDER BY s.step, o.first_seen, s.rank
"""


def drift_table(store, stat="norm"):
    """DataFrame step, rank, module, first_seen, drift (see the module docstring)."""
    return store.con.execute(_DRIFT_SQL, {"stat": stat}).df()


def drift_matrix(table, max_modules=60):
    """(matrix modules × columns, module names, column labels [(step, rank)]); the `max_modules` modules
    with the largest drift, kept in execution order."""
    columns = sorted({(int(s), int(r)) for s, r in zip(table["step"], table["rank"])})
    by_module = table.groupby("module").agg(first_seen=("first_seen", "min"), worst=("drift", "max"))
    chosen = by_module.sort_values("worst", ascending=False).head(max_modules).sort_values("first_seen").index
    rows = {name: i for i, name in enumerate(chosen)}
    where = {column: j for j, column in enumerate(columns)}
    matrix = np.full((len(rows), len(columns)), np.nan)
    for step, rank, module, drift in zip(table["step"], table["rank"], table["module"], table["drift"]):
        if module in rows:
            matrix[rows[module], where[(int(step), int(rank))]] = drift
    return matrix, list(chosen), columns


def first_drift(table, threshold) -> Optional[dict]:
    """The first (step, module in execution order, rank) whose drift exceeds `threshold`, or None."""
    over = table[table["drift"] > threshold]
    if over.empty:
        return None
    first = over.sort_values(["step", "first_seen", "rank"]).iloc[0]
    return {"step": int(first["step"]), "rank": int(first["rank"]), "module": str(first["module"]),
            "drift": float(first["drift"])}


def _png(matrix, modules, columns, stat):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    shown = np.log10(np.clip(np.nan_to_num(matrix, nan=0.0, posinf=1e6), 1e-12, 1e6))
    width = min(4 + 0.25 * len(columns), 40)
    height = min(2 + 0.22 * len(modules), 40)
    figure, axes = plt.subplots(figsize=(width, height))
    image = axes.imshow(shown, aspect="auto", cmap="magma", vmin=-12, vmax=6, interpolation="nearest")
    # module names come from data: never parsed as mathtext (`$\\foo$` would fail to render)
    axes.set_yticks(range(len(modules)), [m[-60:] for m in modules], fontsize=6, parse_math=False)
    step_of = [step for step, _ in columns]
    ticks = [j for j in range(len(columns)) if j == 0 or step_of[j] != step_of[j - 1]]
    axes.set_xticks(ticks, [f"step {step_of[j]}" for j in ticks], fontsize=7, rotation=90)
    axes.set_xlabel("step × rank (ranks in order within each step)")
    figure.colorbar(image, ax=axes, label=f"log10 relative drift of {stat} vs the first step")
    axes.set_title(f"msprobe trend: {stat} drift by module")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def _html(png, table, first, stat, threshold):
    top = table[table["drift"] > threshold].sort_values(["step", "first_seen", "rank"]).head(50)
    rows = "".join(f"<tr><td>{int(r.step)}</td><td>{int(r.rank)}</td><td>{html.escape(str(r.module))}</td>"
                   f"<td>{r.drift:.3g}</td></tr>" for r in top.itertuples())
    where = ("no cell drifts beyond the threshold" if first is None else
             f"the job starts to drift at step {first['step']}, rank {first['rank']}, in "
             f"{html.escape(first['module'])} (drift {first['drift']:.3g})")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>msprobe trend</title>"
            f"<style>body{{font-family:sans-serif}}table{{border-collapse:collapse}}td,th{{border:1px solid #999;"
            f"padding:2px 6px}}</style></head><body><h1>msprobe trend: {html.escape(stat)} drift</h1>"
            f"<p>{where}; threshold {threshold:g}.</p>"
            f"<img alt='heatmap' src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>"
            f"<h2>First cells over the threshold</h2><table><tr><th>step</th><th>rank</th><th>module</th>"
            f"<th>drift</th></tr>{rows}</table></body></html>")


def write_heatmaps(store, output_dir, stat="norm", threshold=1e-3, max_modules=60) -> dict:
    """trend_heatmap.png and trend_heatmap.html in output_dir; returns their paths and the first drift."""
    table = drift_table(store, stat)
    first = first_drift(table, threshold) if len(table) else None
    result: Dict[str, Any] = {"first_drift": first, "png": None, "html": None}
    if not len(table):
        return result
    matrix, modules, columns = drift_matrix(table, max_modules)
    png = _png(matrix, modules, columns, stat)
    result["png"] = os.path.join(output_dir, "trend_heatmap.png")
    result["html"] = os.path.join(output_dir, "trend_heatmap.html")
    atomic_write_bytes(result["png"], png)
    atomic_write_text(result["html"], _html(png, table, first, stat, threshold if math.isfinite(threshold) else 0))
    return result
