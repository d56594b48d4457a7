"""`python -m ortmlx run MODEL.onnx --html OUT.html`: a picture of the partition.

The page draws the model's graph (the top-level graph of the .onnx file, one box per node, in
topological levels) with every node coloured by where it ran: one colour per fused subgraph of
MLXExecutionProvider, grey for ORT's CPU EP (a red border where the EP refused the node; the
reason is in the node's tooltip), dashed white for nodes that were no longer in ORT's graph when
it partitioned (rewritten by ORT's basic optimisations: constant folding, e.g. of shape
arithmetic, and fused patterns). The legend gives each partition's node count and time per run.

Where a node ran comes from the EP's JSON report (the node names inside each fused node, the
refused nodes with their reasons) and, for the nodes that stayed on ORT's CPU EP without being
refused by name, from the node names of ORT's graph after its basic optimisations (a CPU-only
session with ORT_ENABLE_BASIC writes it out). Times per subgraph are the EP's own Compute wall
times (report "seconds" over "runs"), counted from the second run so that compilation is not in
them; ORT CPU's is its kernel time per run from ORT's profiler.

The page is self-contained: the data is embedded as JSON and drawn by an inline script into an
SVG (no network, no external files), with pan (drag, wheel), zoom (ctrl+wheel, buttons), a legend
that highlights a partition on hover, and a checkbox that shows the nodes ORT rewrote (hidden by
default, the edges through them joined up).
"""

from __future__ import annotations

import html as _html
import json
import os
import re
import tempfile
from collections import defaultdict

# Colours of the EP's fused subgraphs, in order of their first node in the drawing; chosen to
# stay apart from the grey of ORT CPU and from each other.
PALETTE = ["#4e79a7", "#59a14f", "#b07aa1", "#f28e2b", "#76b7b2", "#edc948", "#9c755f",
           "#ff9da7", "#86bcb6", "#8cd17d", "#499894", "#d4a6c8"]
CPU_COLOUR = "#c8c8c8"
FOLDED_COLOUR = "#ffffff"

# Layout grid (pixels): box size and gaps between levels / neighbours.
BOX_W, BOX_H, GAP_X, GAP_Y = 132, 28, 14, 46


def ort_graph_node_names(model_path: str) -> set[str] | None:
    """Names of the nodes in ORT's graph after its basic (level-1) optimisations, the graph the
    EP is offered: a CPU-only session at ORT_ENABLE_BASIC writes it to a temporary file. None if
    ORT cannot (the caller then treats every unmatched node as run on ORT CPU)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="ortmlx-html-") as tmp:
        out = os.path.join(tmp, "basic.onnx")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = out
        try:
            ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
            graph = onnx.load(out, load_external_data=False).graph
        except Exception:  # noqa: BLE001 - the picture falls back, the run is not affected
            return None
    return {n.name for n in graph.node if n.name}


def _edges(nodes) -> list[tuple[int, int]]:
    """(producer index, consumer index) pairs of the graph's data edges."""
    producer = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = i
    return sorted({(producer[x], i) for i, n in enumerate(nodes) for x in n.input
                   if x in producer and producer[x] != i})


def _bridged(edges, hidden: set[int]) -> list[tuple[int, int]]:
    """Edges among the shown nodes, with paths through hidden nodes joined up: a shown node's
    producers are the nearest shown ancestors."""
    preds = defaultdict(set)
    for p, i in edges:
        preds[i].add(p)
    memo: dict[int, set[int]] = {}

    def shown_ancestors(i):  # of a hidden node
        if i not in memo:
            memo[i] = set()  # a cycle through hidden nodes ends here
            out = set()
            for p in preds[i]:
                out |= shown_ancestors(p) if p in hidden else {p}
            memo[i] = out
        return memo[i]

    out = set()
    for i in {i for _, i in edges} - hidden:
        for p in preds[i]:
            out |= {(a, i) for a in (shown_ancestors(p) if p in hidden else {p})}
    return sorted(out)


def _layout(n_nodes: int, edges, shown) -> dict[int, tuple[float, float]]:
    """Top-left corner (x, y) of each shown node's box. Levels: the longest path from the graph
    inputs (Kahn's order; a valid ONNX graph is sorted, but this does not rely on it), nodes
    without producers (Constant, nodes reading only inputs and initializers) one level above
    their first consumer so that they do not all crowd level 0. Within a level, nodes are ordered
    by the mean position of their producers (one barycentre sweep down), then centred."""
    shown = sorted(shown)
    preds, succs = defaultdict(list), defaultdict(list)
    for p, i in edges:
        preds[i].append(p)
        succs[p].append(i)
    indeg = {i: len(preds[i]) for i in shown}
    order = [i for i in shown if indeg[i] == 0]
    for i in order:
        for s in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                order.append(s)
    seen = set(order)
    order += [i for i in shown if i not in seen]  # a cycle: draw it anyway
    level = {}
    for i in order:
        level[i] = max((level[p] + 1 for p in preds[i] if p in level), default=0)
    for i in reversed(order):
        if not preds[i] and succs[i]:
            level[i] = max(level[i], min(level[s] for s in succs[i]) - 1)
    rows = defaultdict(list)
    for i in shown:
        rows[level[i]].append(i)
    pos: dict[int, float] = {}
    for lv in sorted(rows):
        def key(i):
            placed = [pos[p] for p in preds[i] if p in pos]
            return (sum(placed) / len(placed) if placed else float(i), i)

        for k, i in enumerate(sorted(rows[lv], key=key)):
            pos[i] = k - (len(rows[lv]) - 1) / 2  # centred on 0
    x0 = min(pos.values(), default=0.0)
    top = min(level.values(), default=0)
    return {i: (round((pos[i] - x0) * (BOX_W + GAP_X) + 20, 1),
                (level[i] - top) * (BOX_H + GAP_Y) + 20) for i in shown}


def cpu_seconds_per_run(events: list[dict]) -> float | None:
    """Kernel time per session run of the nodes on ORT's CPU EP, from ORT's profiler events
    (their "Node" events' durations over the number of runs, all runs profiled)."""
    runs = sum(1 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    if not runs:
        return None
    micros = sum(e.get("dur", 0) for e in events
                 if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")
                 and e.get("args", {}).get("provider") == "CPUExecutionProvider")
    return micros * 1e-6 / runs


def placement(model, first_report: dict, last_report: dict, ort_names: set[str] | None,
              cpu_seconds: float | None = None) -> dict:
    """The page's data: nodes (where each ran, why refused), edges, partitions (legend).

    first_report / last_report: the EP's report after the first run and after the last; the
    subgraph times are their difference over the runs between. cpu_seconds: kernel time per run
    of ORT's CPU EP (cpu_seconds_per_run), shown where there are CPU nodes."""
    nodes = list(model.graph.node)
    fused = last_report.get("fused", {})
    first_fused = first_report.get("fused", {})
    part_of = {}
    for fname, f in fused.items():
        for n in f["nodes"]:
            if n:
                part_of.setdefault(n, fname)
    refused_by_name, refused_by_op = {}, {}
    for claim in last_report.get("claims", {}).values():
        for op, r in claim.get("refused", {}).items():
            refused_by_op.setdefault(op.split(":")[-1], r.get("reason", ""))
            for n in r.get("nodes", []):
                if n:
                    refused_by_name.setdefault(n, r.get("reason", ""))

    # Partitions in order of their first node in the model.
    order = []
    for n in nodes:
        f = part_of.get(n.name)
        if f and f not in order:
            order.append(f)
    order += [f for f in fused if f not in order]  # fused nodes of subgraphs (If/Loop bodies)
    pid = {f: f"mlx{k}" for k, f in enumerate(order)}

    out_nodes = []
    for n in nodes:
        item = {"name": n.name, "op": n.op_type, "domain": n.domain}
        f = part_of.get(n.name)
        if f is not None:
            item["part"] = pid[f]
        elif n.name in refused_by_name:
            item["part"], item["reason"] = "cpu", refused_by_name[n.name]
        elif ort_names is None or n.name in ort_names:
            item["part"] = "cpu"
            if n.op_type in refused_by_op:
                item["reason"] = f"(first reason given for {n.op_type}) {refused_by_op[n.op_type]}"
        else:
            item["part"] = "folded"
        out_nodes.append(item)
    # Two layouts: every node, and ORT's graph only (the rewritten nodes hidden, the default
    # view where there are any: constant shape arithmetic otherwise crowds the picture).
    edges = _edges(nodes)
    hidden = {i for i, item in enumerate(out_nodes) if item["part"] == "folded"}
    full = _layout(len(nodes), edges, range(len(nodes)))
    compact_edges = _bridged(edges, hidden)
    compact = _layout(len(nodes), compact_edges, set(range(len(nodes))) - hidden)
    for i, item in enumerate(out_nodes):
        item["x"], item["y"] = full[i]
        if i in compact:
            item["cx"], item["cy"] = compact[i]

    counts = defaultdict(int)
    for item in out_nodes:
        counts[item["part"]] += 1
    partitions = []
    for k, f in enumerate(order):
        runs = fused[f].get("runs", 0) - first_fused.get(f, {}).get("runs", 0)
        secs = fused[f].get("seconds", 0.0) - first_fused.get(f, {}).get("seconds", 0.0)
        per_run = secs / runs if runs > 0 else None  # as cli._seconds_per_run
        partitions.append({
            "id": pid[f], "label": f"MLX subgraph {k + 1}", "fused_node": f,
            "colour": PALETTE[k % len(PALETTE)], "drawn": counts[pid[f]],
            "nodes": len(fused[f]["nodes"]), "seconds_per_run": per_run,
            "op_types": sorted(set(fused[f].get("op_types", []))),
        })
    rest, note = None, None
    if cpu_seconds is not None and counts["cpu"]:
        rest, note = cpu_seconds, "its kernels, per ORT's profiler"
    partitions.append({
        "id": "cpu", "label": "ORT CPU", "colour": CPU_COLOUR, "drawn": counts["cpu"],
        "nodes": counts["cpu"], "refused": sum(1 for i in out_nodes if i.get("reason")),
        "seconds_per_run": rest, "time_note": note,
    })
    if counts["folded"]:
        partitions.append({"id": "folded", "label": "rewritten by ORT before partitioning",
                           "colour": FOLDED_COLOUR, "drawn": counts["folded"],
                           "nodes": counts["folded"], "seconds_per_run": None})
    drawn_names = {n.name for n in nodes}
    extra = sum(1 for f in fused.values() for n in f["nodes"] if n not in drawn_names)
    return {"nodes": out_nodes, "edges": edges, "compact_edges": compact_edges,
            "partitions": partitions,
            "ort_created_on_ep": extra, "box": [BOX_W, BOX_H]}


def write_html(path: str, data: dict, title: str, summary: list[str]) -> None:
    """Writes the self-contained page: `data` from placement(), `summary` lines above the graph."""
    # "<" escaped: nothing in the data (names come from the model) can close the script tag.
    blob = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    head = "".join(f"<div>{_html.escape(s)}</div>" for s in summary)
    fill = {"TITLE": _html.escape(title), "SUMMARY": head, "DATA": blob, "SCRIPT": _SCRIPT}
    page = re.sub(r"@(TITLE|SUMMARY|DATA|SCRIPT)@", lambda m: fill[m.group(1)], _TEMPLATE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ortmlx partition: @TITLE@</title>
<style>
html,body{margin:0;height:100%;font:13px system-ui,sans-serif;color:#222}
body{display:flex;flex-direction:column}
header{padding:6px 10px;border-bottom:1px solid #ccc;background:#fafafa}
header h1{font-size:15px;margin:0 0 2px}
#main{flex:1;display:flex;min-height:0}
#legend{width:300px;overflow:auto;padding:8px;border-right:1px solid #ccc;background:#fafafa}
.legend-item{display:flex;align-items:flex-start;gap:6px;padding:3px;cursor:default}
.legend-item:hover{background:#e8eef7}
.swatch{flex:none;width:14px;height:14px;border:1px solid #555;margin-top:2px}
.swatch.folded{border-style:dashed}
.legend-item small{color:#555}
#view{flex:1;position:relative;overflow:hidden;background:#fff;cursor:grab}
#view.dragging{cursor:grabbing}
#controls{position:absolute;right:8px;top:8px;display:flex;gap:4px;z-index:1}
#controls button{font:12px system-ui;padding:2px 8px}
#hint{font-size:11px;color:#666;background:#fffc;padding:2px 4px}
svg{display:block;width:100%;height:100%}
.node rect{stroke:#444;stroke-width:1}
.node.refused rect{stroke:#d62728;stroke-width:3}
.node.folded rect{stroke:#999;stroke-dasharray:4 3}
.node text{font:11px system-ui,sans-serif;pointer-events:none}
.node.folded text{fill:#999}
.edge{fill:none;stroke:#9aa;stroke-width:1}
.dim{opacity:.15}
</style></head>
<body>
<header><h1>@TITLE@</h1>@SUMMARY@</header>
<div id="main"><div id="legend"></div>
<div id="view"><div id="controls"><button id="fit">fit</button><button id="zin">+</button>
<button id="zout">&minus;</button>
<span id="hint">drag or wheel: move, ctrl+wheel: zoom, hover: details</span></div><svg id="graph"></svg></div></div>
<script type="application/json" id="partition-data">@DATA@</script>
<script>@SCRIPT@</script>
</body></html>
"""

# The page's script: draws nodes and edges from the embedded JSON into the SVG, fills the legend,
# and wires pan/zoom. body[data-rendered] is set at the end (tests read it back).
_SCRIPT = r"""
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("partition-data").textContent);
  const [W, H] = data.box;
  const parts = {};
  data.partitions.forEach(p => { parts[p.id] = p; });
  const svg = document.getElementById("graph");
  const root = document.createElementNS(NS, "g");
  svg.appendChild(root);
  const el = (tag, attrs, parent) => {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  };
  const esc = t => String(t).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[c]);
  const ms = s => (s === null || s === undefined) ? "" : (s * 1e3).toFixed(3) + " ms/run";
  const edges = el("g", {id: "edges"}, root);
  const nodes = el("g", {id: "nodes"}, root);
  const boxes = data.nodes.map((n, i) => {
    const part = parts[n.part];
    const cls = ["node", n.part === "folded" ? "folded" : (n.part === "cpu" ? "cpu" : "mlx")];
    if (n.reason) cls.push("refused");
    const g = el("g", {"class": cls.join(" "), "data-part": n.part, "data-index": i}, nodes);
    el("rect", {width: W, height: H, rx: 4, fill: part.colour}, g);
    const t = el("text", {x: W / 2, y: H / 2 + 4, "text-anchor": "middle"}, g);
    t.textContent = n.op.length > 20 ? n.op.slice(0, 19) + "\u2026" : n.op;
    const lines = [`${n.name || "(unnamed)"}`, `op: ${n.domain ? n.domain + ":" : ""}${n.op}`,
                   `ran on: ${part.label}`];
    if (n.reason) lines.push(`refused by the EP: ${n.reason}`);
    el("title", {}, g).textContent = lines.join("\n");
    return g;
  });
  // Two views: every node, or ORT's graph only (rewritten nodes hidden, edges joined up).
  let maxX = 0, maxY = 0, compact = false;
  const place = c => {
    compact = c;
    maxX = 0; maxY = 0;
    data.nodes.forEach((n, i) => {
      const x = c ? n.cx : n.x, y = c ? n.cy : n.y;
      if (x === undefined) { boxes[i].style.display = "none"; return; }
      boxes[i].style.display = "";
      boxes[i].setAttribute("transform", `translate(${x},${y})`);
      maxX = Math.max(maxX, x + W); maxY = Math.max(maxY, y + H);
    });
    edges.textContent = "";
    (c ? data.compact_edges : data.edges).forEach(([a, b]) => {
      const p = data.nodes[a], q = data.nodes[b];
      const x1 = (c ? p.cx : p.x) + W / 2, y1 = (c ? p.cy : p.y) + H;
      const x2 = (c ? q.cx : q.x) + W / 2, y2 = c ? q.cy : q.y;
      const my = (y1 + y2) / 2;
      el("path", {"class": "edge", "data-from": a, "data-to": b,
                  d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`}, edges);
    });
  };
  const anyFolded = data.nodes.some(n => n.part === "folded");
  // page.html#all opens with the rewritten nodes shown (links, screenshots).
  const showAll = location.hash === "#all";
  place(anyFolded && !showAll);
  // Legend: one entry per partition; hovering one dims the other nodes.
  const legend = document.getElementById("legend");
  const h2 = document.createElement("b");
  h2.textContent = `${data.nodes.length} nodes, ${data.partitions.filter(p => p.id.startsWith("mlx")).length} MLX subgraph(s)`;
  legend.appendChild(h2);
  data.partitions.forEach(p => {
    const item = document.createElement("div");
    item.className = "legend-item";
    item.dataset.part = p.id;
    const sw = document.createElement("span");
    sw.className = "swatch" + (p.id === "folded" ? " folded" : "");
    sw.style.background = p.colour;
    const text = document.createElement("span");
    let html = `<b>${p.label}</b>: <span class="count">${p.drawn}</span> node(s)`;
    if (p.nodes !== p.drawn) html += ` (${p.nodes} in ORT's graph)`;
    if (p.refused) html += `, ${p.refused} refused`;
    if (p.seconds_per_run !== null && p.seconds_per_run !== undefined)
      html += `<br><span class="time">${ms(p.seconds_per_run)}</span>`;
    if (p.time_note) html += ` <small>(${p.time_note})</small>`;
    if (p.refused) html += `<br><small>red border: refused by the EP (hover for the reason)</small>`;
    if (p.id === "folded") html += `<br><small>folded constants, fused patterns</small>` +
      `<br><label><input type="checkbox" id="show-folded"> show them</label>`;
    if (p.op_types) html += `<br><small>${esc(p.op_types.join(", "))}</small>`;
    text.innerHTML = html;
    item.append(sw, text);
    item.addEventListener("mouseenter", () => {
      nodes.querySelectorAll(".node").forEach(g => g.classList.toggle("dim", g.dataset.part !== p.id));
    });
    item.addEventListener("mouseleave", () => {
      nodes.querySelectorAll(".node").forEach(g => g.classList.remove("dim"));
    });
    legend.appendChild(item);
  });
  const toggle = document.getElementById("show-folded");
  if (toggle) {
    toggle.checked = showAll;
    toggle.addEventListener("change", () => { place(!toggle.checked); fit(); });
  }
  if (data.ort_created_on_ep) {
    const note = document.createElement("p");
    note.innerHTML = `<small>${data.ort_created_on_ep} node(s) that ORT created when rewriting ran inside the MLX subgraphs (not drawn)</small>`;
    legend.appendChild(note);
  }
  // Pan (drag) and zoom (wheel, buttons) by a transform on the root group.
  const view = document.getElementById("view");
  let s = 1, tx = 0, ty = 0;
  const apply = () => root.setAttribute("transform", `translate(${tx},${ty}) scale(${s})`);
  const fit = () => {
    const w = view.clientWidth || 800, h = view.clientHeight || 600;
    // The width fits, not below a scale where the op names still read; scroll for the rest.
    s = Math.max(0.45, Math.min(1, (w - 20) / (maxX + 20)));
    tx = Math.max(10, (w - (maxX + 20) * s) / 2);
    ty = 10;
    apply();
  };
  const zoom = (f, cx, cy) => {
    tx = cx - (cx - tx) * f; ty = cy - (cy - ty) * f; s *= f; apply();
  };
  view.addEventListener("wheel", e => {
    e.preventDefault();
    const r = view.getBoundingClientRect();
    if (e.ctrlKey || e.metaKey)  // ctrl+wheel (and trackpad pinch) zooms, the wheel scrolls
      zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - r.left, e.clientY - r.top);
    else { tx -= e.deltaX; ty -= e.deltaY; apply(); }
  }, {passive: false});
  let drag = null;
  view.addEventListener("mousedown", e => {
    if (e.target.tagName === "BUTTON") return;
    drag = [e.clientX - tx, e.clientY - ty]; view.classList.add("dragging");
  });
  window.addEventListener("mousemove", e => {
    if (drag) { tx = e.clientX - drag[0]; ty = e.clientY - drag[1]; apply(); }
  });
  window.addEventListener("mouseup", () => { drag = null; view.classList.remove("dragging"); });
  const centre = () => [view.clientWidth / 2, view.clientHeight / 2];
  document.getElementById("fit").onclick = fit;
  document.getElementById("zin").onclick = () => zoom(1.25, ...centre());
  document.getElementById("zout").onclick = () => zoom(0.8, ...centre());
  fit();
  document.body.dataset.rendered = String(data.nodes.length);
})();
"""
