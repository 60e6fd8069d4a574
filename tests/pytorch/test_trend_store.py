"""trend: a real 3-step dump into trend.duckdb, values as dumped, incremental re-runs, drift heatmap."""
import json
import shutil

import duckdb
import pytest
import torch

from msprobe.cli import main


@pytest.fixture(scope="module")
def three_steps(tmp_path_factory):
    """Steps 0 and 1 see the same input; step 2 sees it ×10: the job drifts at step 2."""
    from msprobe.pytorch import PrecisionDebugger

    root = tmp_path_factory.mktemp("trend")
    config = root / "config.json"
    config.write_text(json.dumps({"task": "statistics", "dump_path": str(root / "dump"), "level": "L1",
                                  "statistics": {}}))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    x = torch.randn(4, 8)
    debugger = PrecisionDebugger(config_path=str(config), model=model)
    for step in range(3):
        debugger.start()
        model(x * (10.0 if step == 2 else 1.0)).sum().backward()
        debugger.stop()
        debugger.step()
    debugger.close()
    return root / "dump"


def _dumped(dump, step, entry, section, stat):
    data = json.loads((dump / f"step{step}" / "rank" / "dump.json").read_text())["data"]
    return data[entry][section][0][stat]


def test_store_holds_the_dumped_statistics_and_the_heatmap_names_step2(three_steps, tmp_path):
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "trend", "-i", str(three_steps), "-o", str(out)]) == 0
    con = duckdb.connect(str(out / "trend.duckdb"), read_only=True)
    for step in range(3):
        stored = con.execute("SELECT value FROM stats WHERE step = ? AND rank = 0 AND stat = 'norm' AND "
                             "tensor = 'Functional.linear.0.forward.output.0'", [step]).fetchall()
        assert stored == [(_dumped(three_steps, step, "Functional.linear.0.forward", "output", "Norm"),)]
    assert con.execute("SELECT DISTINCT module FROM stats WHERE call = 'Functional.linear.1.forward'").fetchall() \
        == [("Functional.linear.forward",)]
    assert sorted(con.execute("SELECT step, rank FROM ingested").fetchall()) == [(0, 0), (1, 0), (2, 0)]
    con.close()
    assert (out / "trend.duckdb").stat().st_mode & 0o007 == 0
    png = (out / "trend_heatmap.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "trend_heatmap.html").read_text()
    assert "data:image/png;base64," in page and "http" not in page.lower().replace("http-equiv", "")
    # the first call of step 2 is the `x * 10.0` itself (Tensor.__mul__), before the first linear
    assert "drift at step 2, rank 0, in Tensor.__mul__.forward" in page


def test_rerun_adds_new_steps_without_rewriting_old_ones(three_steps, tmp_path):
    partial = tmp_path / "dump"
    for step in (0, 1):
        shutil.copytree(three_steps / f"step{step}", partial / f"step{step}")
    out = tmp_path / "out"
    assert main(["-f", "mindspore", "trend", "-i", str(partial), "-o", str(out)]) == 0
    con = duckdb.connect(str(out / "trend.duckdb"), read_only=True)
    before = con.execute("SELECT step, rank, rows, ingested_at FROM ingested ORDER BY step").fetchall()
    old_rows = con.execute("SELECT * FROM stats ORDER BY rowid").fetchall()
    con.close()
    assert "no cell drifts beyond the threshold" in (out / "trend_heatmap.html").read_text()

    shutil.copytree(three_steps / "step2", partial / "step2")
    assert main(["-f", "pytorch", "trend", "-i", str(partial), "-o", str(out)]) == 0
    assert main(["-f", "pytorch", "trend", "-i", str(partial), "-o", str(out)]) == 0   # nothing new
    con = duckdb.connect(str(out / "trend.duckdb"), read_only=True)
    after = con.execute("SELECT step, rank, rows, ingested_at FROM ingested ORDER BY step").fetchall()
    assert after[:2] == before and [row[0] for row in after] == [0, 1, 2]
    assert con.execute("SELECT * FROM stats WHERE step < 2 ORDER BY rowid").fetchall() == old_rows
    assert con.execute("SELECT count(*) FROM stats WHERE step = 2").fetchone()[0] == after[2][2] == before[0][2]
    con.close()
