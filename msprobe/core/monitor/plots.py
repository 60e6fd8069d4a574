"""Pictures of a monitor run without TensorBoard (matplotlib, Agg backend), written next to the csv files.

`plot_run(run_dir)` draws
* `grad_norm_heatmap.png`: log10 gradient norm per parameter (rows, in model order) and step (columns),
  alerts marked with a red x;
* `global_metrics.png`: global gradient norm and update/weight ratio per step (when recorded);
and writes `summary.md`: the first alert and its step, then the first alerts in call order.
Also runnable offline: `python -m msprobe.core.monitor.plots RUN_DIR`.
"""
import math
import os
import re
import sys

from msprobe.core.monitor.files import read_csv_table, save_figure, write_bytes
from msprobe.core.monitor.writers import ALERTS_FILE, GLOBAL_FILE

__all__ = ["plot_run", "HEATMAP_FILE", "GLOBAL_PLOT_FILE", "SUMMARY_FILE"]

HEATMAP_FILE = "grad_norm_heatmap.png"
GLOBAL_PLOT_FILE = "global_metrics.png"
SUMMARY_FILE = "summary.md"


def _float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _step(text):
    try:
        return int(text)
    except ValueError:
        return None


def _grad_norms(run_dir):
    """(names, steps, {(name, step): norm}) from grad_reduced csv files (grad_unreduced when absent)."""
    for prefix in ("grad_reduced", "grad_unreduced"):
        pattern = re.compile(rf"^{prefix}_(\d+)-(\d+)\.csv$")
        files = sorted((int(m.group(1)), name) for name in os.listdir(run_dir) for m in [pattern.match(name)] if m)
        if not files:
            continue
        names, steps, norms = [], set(), {}
        for _, file_name in files:
            header, rows = read_csv_table(os.path.join(run_dir, file_name), what="monitor csv")
            if "norm" not in header or len(header) < 3:
                return [], [], {}
            col = header.index("norm")
            for row in rows:
                name, step = row[1], _step(row[2])
                if step is None:
                    continue
                if name not in norms and name not in names:
                    names.append(name)
                norms[(name, step)] = _float(row[col])
                steps.add(step)
        return names, sorted(steps), norms
    return [], [], {}


def _alerts(run_dir):
    path = os.path.join(run_dir, ALERTS_FILE)
    if not os.path.isfile(path):
        return []
    header, rows = read_csv_table(path, what="monitor csv")
    return [dict(zip(header, row)) for row in rows if _step(row[0] if row else "") is not None]


def plot_run(run_dir):
    """Draw the pictures and the summary of one run directory; returns the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    written = []
    alerts = _alerts(run_dir)
    names, steps, norms = _grad_norms(run_dir)
    if names and steps:
        matrix = np.full((len(names), len(steps)), np.nan)
        for i, name in enumerate(names):
            for j, step in enumerate(steps):
                value = norms.get((name, step), math.nan)
                matrix[i, j] = math.log10(value) if value > 0 and math.isfinite(value) else math.nan
        height = min(2 + 0.22 * len(names), 30)
        fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(steps) + 4), height))
        image = ax.imshow(matrix, aspect="auto", cmap="viridis", interpolation="nearest")
        fig.colorbar(image, ax=ax, label="log10 gradient norm")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        tick_every = max(1, len(steps) // 20)
        ax.set_xticks(range(0, len(steps), tick_every))
        ax.set_xticklabels(steps[::tick_every])
        ax.set_xlabel("step")
        step_index = {s: j for j, s in enumerate(steps)}
        name_index = {n: i for i, n in enumerate(names)}
        marks = [(step_index[int(a["step"])], name_index[a["name"]]) for a in alerts
                 if a["prefix"].startswith("grad") and a["name"] in name_index and int(a["step"]) in step_index]
        nonfinite = [(j, i) for i, name in enumerate(names) for j, step in enumerate(steps)
                     if not math.isfinite(norms.get((name, step), 0.0))]
        if marks:
            ax.scatter(*zip(*marks), marker="x", color="red", s=60, label="alert")
        if nonfinite:
            ax.scatter(*zip(*nonfinite), marker="s", facecolors="none", edgecolors="magenta", s=60, label="NaN/Inf")
        if marks or nonfinite:
            ax.legend(loc="upper right", fontsize=7)
        ax.set_title("gradient norm per parameter and step")
        # fixed margins: tight_layout measures every tick label and costs seconds on big models
        label_inches = 0.3 + 0.065 * max(len(n) for n in names)
        fig.subplots_adjust(left=min(0.6, label_inches / fig.get_figwidth()), right=0.97, top=1 - 0.45 / height,
                            bottom=0.55 / height)
        path = os.path.join(run_dir, HEATMAP_FILE)
        save_figure(fig, path, dpi=90)
        plt.close(fig)
        written.append(path)
    global_path = os.path.join(run_dir, GLOBAL_FILE)
    if os.path.isfile(global_path):
        header, data = read_csv_table(global_path, what="monitor csv")
        data = [row for row in data if _step(row[0]) is not None] if header and header[0] == "step" else []
        columns = {name: [_float(row[i]) for row in data] for i, name in enumerate(header)}
        series = [(c, columns[c]) for c in ("grad_norm", "update_ratio")
                  if any(math.isfinite(v) for v in columns.get(c, []))]
        if series:
            fig, axes = plt.subplots(len(series), 1, figsize=(7, 2.6 * len(series)), sharex=True, squeeze=False)
            for ax, (label, values) in zip(axes[:, 0], series):
                ax.plot(columns["step"], values, marker="o", markersize=3)
                ax.set_ylabel(label.replace("_", " "))
                if all(v > 0 for v in values if math.isfinite(v)):
                    ax.set_yscale("log")
                ax.grid(alpha=0.3)
                for alert in alerts:
                    ax.axvline(int(alert["step"]), color="red", alpha=0.15)
            axes[-1, 0].set_xlabel("step")
            fig.suptitle("global gradient norm and update/weight ratio")
            fig.tight_layout()
            path = os.path.join(run_dir, GLOBAL_PLOT_FILE)
            save_figure(fig, path, dpi=90)
            plt.close(fig)
            written.append(path)
    write_bytes(os.path.join(run_dir, SUMMARY_FILE), _summary(alerts).encode("utf-8"))
    written.append(os.path.join(run_dir, SUMMARY_FILE))
    return written


def _summary(alerts):
    lines = ["# monitor summary", ""]
    if not alerts:
        return "\n".join(lines + ["No alert was raised.", ""])
    ordered = sorted(alerts, key=lambda a: (int(a["step"]), int(a["call_id"])))
    first = ordered[0]
    lines += [f"First alert: step {first['step']}, {first['prefix']} `{first['name']}` {first['io']} "
              f"({first['rule']}): {first['message']}", "", f"{len(alerts)} alert(s) in all. First ones in call order:", "",
              "| step | rule | kind | name | value | baseline |", "|---|---|---|---|---|---|"]
    for alert in ordered[:20]:
        kind = alert["io"] or alert["prefix"]
        lines.append(f"| {alert['step']} | {alert['rule']} | {kind} | {alert['name']} | {alert['value']} | {alert['baseline']} |")
    return "\n".join(lines + [""])


if __name__ == "__main__":
    for written_path in plot_run(sys.argv[1]):
        print(written_path)
