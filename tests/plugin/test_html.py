"""`python -m ortmlx run MODEL --html OUT.html`: the page, checked in real headless Chromium.

The small model has two MLX subgraphs split by nodes the EP refuses (Casts through a string
tensor, which MLX has no type for) and a Constant that ORT folds before partitioning. Chromium
loads the page, its script draws the graph, and --dump-dom gives back the DOM it built.
"""

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.__main__ import main
from ortmlx.testing import make_model



def chromium() -> str:
    """The Chromium binary ($ORTMLX_CHROMIUM, else chromium / chromium-browser on PATH). Missing
    is a failure, not a skip: this test is the only check that the page works in a browser."""
    exe = os.environ.get("ORTMLX_CHROMIUM") or shutil.which("chromium") or \
        shutil.which("chromium-browser")
    if not exe:
        pytest.fail("Chromium not found: the --html page is tested in headless Chromium. Install "
                    "it (Debian: apt-get install chromium; scripts/setup.sh does so as root) or "
                    "set ORTMLX_CHROMIUM to its path.")
    return exe


def browser_args(exe, profile_dir):
    # --no-sandbox: Chromium refuses to start as root with its sandbox (CI containers run as root).
    return [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            f"--user-data-dir={profile_dir}", "--hide-scrollbars"]


def dump_dom(page: Path, tmp_path: Path, fragment: str = "") -> str:
    r = subprocess.run([*browser_args(chromium(), tmp_path / "profile"), "--dump-dom",
                        page.as_uri() + fragment], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


class Dom(HTMLParser):
    """The drawn nodes (<g class="node ...">, with their <title> text) and legend entries."""

    def __init__(self):
        super().__init__()
        self.nodes, self.legend, self.body = [], [], {}
        self._title = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "g" and "node" in cls:
            self.nodes.append({"classes": cls, "part": a.get("data-part"), "title": "",
                               "fill": None, "shown": "display: none" not in (a.get("style") or "")})
        elif tag == "rect" and self.nodes and self.nodes[-1]["fill"] is None:
            self.nodes[-1]["fill"] = a.get("fill")
        elif tag == "title" and self.nodes:
            self._title = self.nodes[-1]
        elif tag == "div" and "legend-item" in cls:
            self.legend.append(a.get("data-part"))
        elif tag == "body":
            self.body = a

    def handle_endtag(self, tag):
        if tag == "title":
            self._title = None

    def handle_data(self, data):
        if self._title is not None:
            self._title["title"] += data


# A node name that would end the page's script if it were not escaped.
MUL = "mul</script><b>&"


@pytest.fixture
def split_model(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    nodes = [
        h.make_node("Exp", ["x"], ["e"], name="exp"),
        h.make_node("Cast", ["e"], ["s"], to=T.STRING, name="to_string"),
        h.make_node("Cast", ["s"], ["f"], to=T.FLOAT, name="from_string"),
        h.make_node("Constant", [], ["half"], name="half",
                    value=h.make_tensor("half", T.FLOAT, [], [0.5])),
        h.make_node("Mul", ["f", "half"], ["m"], name=MUL),
        h.make_node("Tanh", ["m"], ["y"], name="tanh"),
    ]
    path = tmp_path / "split.onnx"
    onnx.save(make_model(h.make_graph(nodes, "split", [x], [y])), str(path))
    return path


def test_html_page_in_headless_chromium(split_model, tmp_path, capsys):
    page, report = tmp_path / "partition.html", tmp_path / "report.json"
    assert main(["run", str(split_model), "-o", "cpu_claim=all", "--repeat", "2",
                 "--html", str(page), "--report", str(report)]) == 0
    assert f"html        {page}" in capsys.readouterr().out
    summary = json.loads(report.read_text())
    # What ran where, per the EP's report: two fused nodes (exp; mul+tanh), both executed.
    fused = summary["ep_report"]["fused"]
    assert sorted(sorted(f["nodes"]) for f in fused.values()) == [["exp"], [MUL, "tanh"]]
    assert all(f["runs"] > 0 for f in fused.values())
    assert all(p["seconds_per_run"] > 0 for p in summary["partitions"])  # compilation excluded
    reason = summary["refused"]["Cast"]["reason"]
    assert reason

    text = page.read_text()
    assert "<script src" not in text and "<link" not in text and "http://" not in \
        text.replace("http://www.w3.org/2000/svg", "")  # self-contained

    dom = Dom()
    dom.feed(dump_dom(page, tmp_path))
    assert dom.body.get("data-rendered") == "6", "the page's script did not finish drawing"
    assert len(dom.nodes) == 6  # one box per graph node
    by_title = {n["title"].split("\n")[0]: n for n in dom.nodes}
    assert set(by_title) == {"exp", "to_string", "from_string", "half", MUL, "tanh"}
    assert by_title["exp"]["part"] != by_title[MUL]["part"]
    assert by_title[MUL]["part"] == by_title["tanh"]["part"]
    assert {by_title[n]["part"] for n in ("exp", MUL)} == {"mlx0", "mlx1"}
    assert by_title["exp"]["fill"] != by_title[MUL]["fill"]  # each subgraph its colour
    for name in ("to_string", "from_string"):
        node = by_title[name]
        assert node["part"] == "cpu" and "refused" in node["classes"]
        assert f"refused by the EP: {reason}" in node["title"]
    assert by_title["half"]["part"] == "folded"  # ORT turns Constant into an initializer
    # Rewritten nodes are hidden by default; #all (as the legend's checkbox) shows them.
    assert [n["title"].split("\n")[0] for n in dom.nodes if not n["shown"]] == ["half"]
    everything = Dom()
    everything.feed(dump_dom(page, tmp_path, "#all"))
    assert len(everything.nodes) == 6 and all(n["shown"] for n in everything.nodes)
    assert all("ran on: MLX subgraph" in by_title[n]["title"] for n in ("exp", MUL, "tanh"))
    # Legend: the two subgraphs, ORT CPU, the folded node.
    assert dom.legend == ["mlx0", "mlx1", "cpu", "folded"]
    data = json.loads(text.split('id="partition-data">', 1)[1].split("</script>", 1)[0])
    times = [p["seconds_per_run"] for p in data["partitions"] if p["id"].startswith("mlx")]
    assert all(t is not None and t > 0 for t in times)
    cpu = next(p for p in data["partitions"] if p["id"] == "cpu")
    assert cpu["seconds_per_run"] is not None and cpu["seconds_per_run"] >= 0  # ORT's profiler


def test_html_page_of_a_corpus_model_places_every_node(tmp_path, capsys):
    """Every node of a real-architecture model is drawn once and placed; the subgraphs are the
    EP's fused nodes. (Python-side only: the browser check above covers the page's script.)"""
    from tests.corpus.corpus import load_model

    model = load_model("mobilenet_v3_small")
    path = tmp_path / "mobilenet.onnx"
    onnx.save(model, str(path))
    page, report = tmp_path / "m.html", tmp_path / "m.json"
    assert main(["run", str(path), "-o", "cpu_claim=all", "--repeat", "1", "--html", str(page),
                 "--report", str(report)]) == 0
    text = page.read_text()
    data = json.loads(text.split('id="partition-data">', 1)[1].split("</script>", 1)[0])
    assert len(data["nodes"]) == len(model.graph.node)
    fused = json.loads(report.read_text())["ep_report"]["fused"]
    mlx = [p for p in data["partitions"] if p["id"].startswith("mlx")]
    assert len(mlx) == len(fused) >= 1
    assert sum(p["drawn"] for p in data["partitions"]) == len(model.graph.node)
    on_ep = {n for f in fused.values() for n in f["nodes"]}
    for n in data["nodes"]:
        assert n["part"].startswith("mlx") == (n["name"] in on_ep), n
    # Distinct positions: no two boxes drawn on top of each other.
    assert len({(n["x"], n["y"]) for n in data["nodes"]}) == len(data["nodes"])
    assert np.isfinite([p["seconds_per_run"] for p in mlx]).all()
