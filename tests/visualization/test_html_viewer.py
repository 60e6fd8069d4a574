"""The self-contained HTML viewer, rendered by real headless Chromium from a file:// URL."""
import os
import re
import shutil
import subprocess

import pytest

from vis_helpers import advisor_suspect, load_vis, node_of_row, rank_dir, run_graph_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"


def chromium(tmp_path, url, *extra, timeout=90):
    profile = tmp_path / "chromium-profile"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", *extra, url]
    result = subprocess.run(command, capture_output=True, timeout=timeout, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="module")
def compare_html(tmp_path_factory, pt_dumps):
    tmp = tmp_path_factory.mktemp("html")
    code, _ = run_graph_cli(tmp, rank_dir(pt_dumps[("statistics", "bad")]),
                            rank_dir(pt_dumps[("statistics", "good")]), "--html", name="out")
    html = sorted((tmp / "out").glob("*.html"))
    assert code == 0 and len(html) == 1
    return html[0]


def _suspect_node(compare_html, pt_dumps):
    vis = load_vis(str(compare_html)[:-len(".html")] + ".vis")
    return node_of_row(vis, advisor_suspect(rank_dir(pt_dumps[("statistics", "bad")]),
                                            rank_dir(pt_dumps[("statistics", "good")])))


def test_html_is_self_contained(compare_html):
    text = compare_html.read_text()
    assert "default-src 'none'" in text
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)


def test_worst_node_ranked_first_and_search_finds_nodes(tmp_path, compare_html, pt_dumps):
    dom = chromium(tmp_path, compare_html.as_uri() + "#search=blocks%5C.2%5C.0%5C.Linear", "--dump-dom")
    assert 'data-ready="1"' in dom
    ranked = re.findall(r'<li class="rank-item( first-bad)?" data-node="([^"]+)"[^>]*><span class="score">([^<]+)<', dom)
    assert ranked, dom[:2000]
    scores = [float(score) for _, _, score in ranked]
    assert scores[0] == max(scores) == 1 and scores == sorted(scores, reverse=True)
    assert ranked[0][1].startswith("Module.blocks.2")  # the faulty block leads the list
    first_bad = [name for marked, name, _ in ranked if marked]
    assert first_bad == [_suspect_node(compare_html, pt_dumps)]  # the "first" badge: compare's advisor's suspect
    hits = re.findall(r'class="search-hit" data-node="([^"]+)" data-side="(NPU|Bench)"', dom)
    assert ("Module.blocks.2.0.Linear.forward.0", "NPU") in hits and ("Module.blocks.2.0.Linear.forward.0", "Bench") in hits
    assert all("blocks.2.0.Linear" in name for name, _ in hits)


def test_selecting_a_node_shows_both_sides_and_stack(tmp_path, compare_html):
    node = "Module.blocks.2.0.Linear.forward.0"
    dom = chromium(tmp_path, compare_html.as_uri() + "#select=" + node, "--dump-dom")
    panel = dom[dom.index('id="panel"'):]
    assert node + ".output.0" in panel and "Bench Max" in panel and "MaxRelativeErr" in panel
    assert 'class="stack"' in panel
    # both trees revealed the node (NPU and bench in sync)
    assert dom.count(f'data-node="{node}"') >= 2


def test_screenshot(tmp_path, compare_html):
    shot = tmp_path / "viewer.png"
    chromium(tmp_path, compare_html.as_uri() + "#search=blocks%5C.2&select=Functional.linear.3.forward",
             "--window-size=1600,1000", f"--screenshot={shot}")
    assert shot.stat().st_size > 20000
    target = os.environ.get("MSPROBE_VIEWER_SCREENSHOT")
    if target:  # docs/visualization.png is refreshed with MSPROBE_VIEWER_SCREENSHOT=docs/visualization.png
        shutil.copy(shot, target)
