"""One self-contained HTML page that shows where the memory goes and why each verdict is what it is.

A table answers "pass or fail"; deciding between layouts goes faster with a picture. The page holds:

- the verdict table (deployment x check, the key number of each cell, coloured by status), with
  the messages of every warning and failure under it;
- the plan's ranked layouts when a plan is given;
- per deployment, one stacked bar per GPU: weights, KV pool, activations + engine overhead, other
  tenants (and the driver's reservation), free; numbers in GiB on the bars and under them;
- the link matrix coloured by link kind, each deployment's TP groups outlined in its colour.

Everything is inline (CSS, SVG); there is no script, no font, no image and no URL, so the file opens
the same from a CI artifact, an e-mail or an air-gapped host.

Callers build one :class:`DeploymentView` per deployment (``report/views.py``: ``deployment_view`` from a
deployment, the machine, the model and its findings; ``views_from_report`` from
``evaluate.Report``) and pass them to :func:`render_html`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpulayout.findings import Status, verdict_of, worst
from pytest_gpulayout.machine.facts import Machine, describe_link, link_family
from pytest_gpulayout.report.text import key_number, per_replica_text, requests_text
from pytest_gpulayout.report.views import DeploymentView, GpuMemory, plan_views, views_from_report
from pytest_gpulayout.suite import CHECK_NAMES

if TYPE_CHECKING:  # annotations only: keep this module light to import
    from pytest_gpulayout.planner.rows import Plan

CHECKS = CHECK_NAMES

# Memory segments, bottom of the card first: (key, label, fill colour, text colour).
SEGMENTS = (
    ("others", "other tenants + driver", "#8d6e63", "#ffffff"),
    ("weights", "weights", "#3f6fb5", "#ffffff"),
    ("kv", "KV pool", "#3d9a5b", "#ffffff"),
    ("activations", "activations + engine overhead", "#e08a3c", "#1a1a1a"),
    ("free", "free", "#eceff1", "#37474f"),
)

# Link families fastest first: fill, text colour.
LINK_COLOURS = {
    "NV": ("#1a9850", "#ffffff"),
    "PIX": ("#91cf60", "#1a1a1a"),
    "PXB": ("#d9ef8b", "#1a1a1a"),
    "PHB": ("#fee08b", "#1a1a1a"),
    "NODE": ("#fdae61", "#1a1a1a"),
    "SYS": ("#d73027", "#ffffff"),
    "NET": ("#7f0000", "#ffffff"),
}
UNKNOWN_LINK = ("#cfd8dc", "#37474f")

STATUS_COLOURS = {
    Status.PASS: ("#e6f4ea", "#1e6b34"),
    Status.WARN: ("#fff3d6", "#8a5300"),
    Status.FAIL: ("#fde2e1", "#b3261e"),
    Status.SKIP: ("#eef0f2", "#5f6368"),
}
#: the verdict of a partial run (checks did not run): neither a pass nor a failure
INCOMPLETE_COLOURS = ("#ede7f6", "#4527a0")

# One outline colour per deployment in the link matrix (cycled).
OUTLINES = ("#1565c0", "#ad1457", "#00838f", "#6a1b9a", "#ef6c00", "#2e7d32", "#4e342e", "#283593")


def write_html(report: Any, path: Path, *, title: str | None = None) -> None:
    """Write the HTML report of an ``evaluate.Report`` to ``path`` (what ``--html`` does)."""
    page = render_html(machine=report.machine, results=views_from_report(report), title=title or "gpulayout check")
    Path(path).write_text(page, encoding="utf-8")


# -- rendering ----------------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _gib(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _css() -> str:
    """The style sheet, package data (``report/report.css``, shipped in the wheel), inlined in the page."""
    return resources.files("pytest_gpulayout.report").joinpath("report.css").read_text(encoding="utf-8")


def _badge(status: Status | str) -> str:
    """A status, or the verdict ``incomplete`` (checks did not run)."""
    bg, fg = STATUS_COLOURS[status] if isinstance(status, Status) else INCOMPLETE_COLOURS
    text = status.value if isinstance(status, Status) else status
    return f'<span class="badge" style="background:{bg};color:{fg}">{_e(text)}</span>'


def _header(machine: Machine, title: str, views: Sequence[DeploymentView], plan: Plan | None = None) -> str:
    kinds = {(g.name, g.memory_total_mib) for g in machine.gpus}
    if len(kinds) == 1:
        name, total = next(iter(kinds))
        gpus = f"{len(machine.gpus)} x {name}, {total / 1024:.1f} GiB each" if name and total else ""
    else:
        gpus = ", ".join(
            f"GPU{g.index} {g.name}" + (f" ({g.total_gib:.1f} GiB)" if g.total_gib is not None else "")
            for g in machine.gpus
            if g.name or g.total_gib is not None
        )
    parts = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">machine: {_e(machine.headline())}'
        + (f", host {_e(machine.host)}" if machine.host else "")
        + "</p>",
    ]
    if gpus:
        parts.append(f'<p class="sub">{_e(gpus)}</p>')
    if plan is not None:  # the answer of a plan is its first row, not the worst of the rows shown
        parts.append(f'<p class="sub" data-recommends="{_e(plan.candidates[0].layout if plan.candidates else "")}">'
                     f"{_recommendation(plan)}</p>")
    elif views:
        not_run = {v.name: v.not_run for v in views if v.not_run}
        overall = worst(v.status for v in views)
        shown = verdict_of(overall, bool(not_run))
        parts.append(
            f'<p class="sub" data-overall="{_e(shown)}">overall: {_badge(overall if shown == overall.value else shown)}'
            f" over {len(views)} deployment{'s' if len(views) != 1 else ''}</p>"
        )
        if not_run:
            count = sum(len(m) for m in not_run.values())
            listed = "; ".join(f"{_e(name)}: {_e(', '.join(m))}" for name, m in not_run.items())
            parts.append(f'<p class="note" data-not-run="{count}">{count} check{"s" if count != 1 else ""} did not '
                         f"run (pytest -k, -x, deselected or interrupted), so no deployment with one of them "
                         f"passed: {listed}</p>")
    for note in machine.notes:
        parts.append(f'<p class="note">{_e(note)}</p>')
    return "\n".join(parts)


def _recommendation(plan: Plan) -> str:
    """What the plan recommends: its first ranked layout (its own status), or that none serves."""
    if not plan.candidates:
        return (f"plan: <b>no layout serves this model on these GPUs</b> with what was asked "
                f"({len(plan.refused)} refused, reasons below)")
    best = plan.candidates[0]
    more = len(plan.candidates) - 1
    return (f"plan recommends: <b>#1 {_e(best.layout)}</b> on GPU{'s' if len(best.gpus) != 1 else ''} "
            f"{_e(','.join(map(str, best.gpus)))} {_badge(best.status)}"
            + (f" ({more} more layout{'s' if more != 1 else ''} ranked after it)" if more else ""))


def _verdict_table(views: Sequence[DeploymentView]) -> str:
    checks = [c for c in CHECKS if any(c in v.findings or c in v.not_run for v in views)]
    head = "".join(f"<th>{_e(c)}</th>" for c in checks)
    rows = []
    for v in views:
        cells = []
        for c in checks:
            f = v.findings.get(c)
            if f is None:
                cells.append(f'<td class="st" data-check="{_e(c)}" data-status="not run">not run</td>'
                             if c in v.not_run else '<td class="st">-</td>')
                continue
            bg, fg = STATUS_COLOURS[f.status]
            num = key_number(f)
            cells.append(
                f'<td class="st" data-check="{_e(c)}" data-status="{_e(f.status.value)}" '
                f'style="background:{bg};color:{fg}" title="{_e(f.message)}">{_e(f.status.value)}'
                + (f" <span style='font-weight:400'>{_e(num)}</span>" if num else "")
                + "</td>"
            )
        rows.append(
            f'<tr data-deployment="{_e(v.name)}"><td><b>{_e(v.name)}</b><br>'
            f'<span class="sub">{_e(v.engine)} {_e(v.layout)}{(" · " + _e(v.model)) if v.model else ""}'
            f'</span></td><td class="st" data-verdict="{_e(v.verdict)}">'
            f'{_badge(v.status if v.verdict == v.status.value else v.verdict)}</td>'
            f'{"".join(cells)}</tr>'
        )
    table = (  # the verdict right after the name: the answer stays on screen on a narrow window
        f'<div class="scroll"><table class="verdicts"><thead><tr><th>deployment</th><th>verdict</th>{head}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    msgs: list[str] = []
    quiet: list[str] = []
    for v in views:
        for f in v.findings.values():
            item = f"<li>{_badge(f.status)} <b>{_e(f.check)}</b> {_e(f.message)}</li>"
            (msgs if f.status in (Status.WARN, Status.FAIL) else quiet).append(item)
    out = table
    if msgs:
        out += f'<h3>What to act on</h3><ul class="msgs">{"".join(msgs)}</ul>'
    if quiet:
        out += (
            f"<details><summary>passed and skipped checks ({len(quiet)})</summary>"
            f'<ul class="msgs">{"".join(quiet)}</ul></details>'
        )
    return out


def _legend_memory() -> str:
    items = "".join(
        f'<span><span class="sw" style="background:{fill}"></span>{_e(label)}</span>'
        for _key, label, fill, _fg in SEGMENTS
    )
    return f'<div class="legend">{items}<span>all numbers in GiB</span></div>'


def _memory_bar(gpu: int, name: str, mem: GpuMemory, scale: float, width: int = 780) -> str:
    """One horizontal stacked bar (SVG) plus a text line with every number."""
    label_w, h = 150, 30
    bar_w = width - label_w
    over_row = 18 if mem.over > 0 else 0  # "over by" gets a row of its own under the bar: never on a label
    height = h + 4 + over_row
    svg = [
        f'<svg class="bar" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="GPU{gpu} memory" data-gpu="{gpu}">',
        f'<text x="0" y="{h // 2 + 6}" font-size="13" font-weight="600">GPU{gpu}</text>',
        f'<text x="48" y="{h // 2 + 6}" font-size="11" fill="#57606a">{_e(_gib(mem.total))} GiB</text>',
    ]
    x, acc = float(label_w), 0.0
    for key, label, fill, fg in SEGMENTS:
        val = mem.part(key)
        shown = min(val, max(0.0, mem.total - acc))  # a layout that does not fit is cut at the card's size
        acc += shown
        w = shown / scale * bar_w if scale else 0.0
        if w <= 0:
            continue
        stroke = ' stroke="#b0bec5"' if key == "free" else ""
        svg.append(
            f'<rect x="{x:.1f}" y="2" width="{w:.1f}" height="{h}" fill="{fill}"{stroke} '
            f'data-segment="{key}" data-gib="{val:.2f}"><title>{_e(label)}: {_gib(val)} GiB</title></rect>'
        )
        text = f"{_gib(val)}" if w < 90 else f"{label.split(' +')[0]} {_gib(val)}"
        if w >= 30:
            svg.append(
                f'<text x="{x + w / 2:.1f}" y="{h // 2 + 6}" font-size="12" text-anchor="middle" '
                f'fill="{fg}">{_e(text)}</text>'
            )
        x += w
    if mem.over > 0:
        svg.append(
            f'<text x="{x:.1f}" y="{h + 2 + over_row - 4}" font-size="12" font-weight="700" '
            f'text-anchor="end" fill="#b3261e" data-over="{mem.over:.2f}">over by {_gib(mem.over)} GiB</text>'
        )
    svg.append("</svg>")
    line = " · ".join(f"{label} {_gib(mem.part(key))} GiB" for key, label, _f, _g in SEGMENTS)
    over = f' · <b style="color:#b3261e">does not fit: over by {_gib(mem.over)} GiB</b>' if mem.over > 0 else ""
    return (
        f'<div class="gpubar">{"".join(svg)}<p class="gpuline" data-gpu-line="{gpu}">{_e(name)}: '
        f"{_e(line)}{over}</p></div>"
    )


def _look(mem: GpuMemory | None) -> tuple[object, ...]:
    """What a bar shows, to the precision it shows it (replicas that look alike are drawn once)."""
    if mem is None:
        return ()
    return tuple(_gib(mem.part(k)) for k, *_ in SEGMENTS) + (_gib(mem.total),)


def _memory_section(machine: Machine, views: Sequence[DeploymentView]) -> str:
    totals = [m.total for v in views for m in v.memory.values()]
    scale = max(totals, default=0.0)
    parts = ["<h2>Memory per GPU</h2>", _legend_memory()]
    for v in views:
        parts.append(
            f'<div class="dep" data-memory="{_e(v.name)}"><h3>{_e(v.name)} '
            f'<span class="sub">{_e(v.engine)} {_e(v.layout)}</span> {_badge(v.status)}</h3>'
        )
        if not v.memory:
            parts.append(f'<p class="note">no memory prediction: {_e(v.note or "memory unknown")}</p>')
        drawn: dict[tuple[object, ...], int] = {}
        same: dict[int, list[int]] = {}
        for rep_i, rep in enumerate(v.replicas):
            look = tuple(_look(v.memory.get(g)) for stage in rep for g in stage)
            if look in drawn and len(v.replicas) > 1:
                same.setdefault(drawn[look], []).append(rep_i)
                continue
            drawn[look] = rep_i
            if len(v.replicas) > 1:
                parts.append(f'<p class="sub">replica {rep_i}</p>')
            for stage_i, stage in enumerate(rep):
                for g in stage:
                    mem = v.memory.get(g)
                    if mem is None:
                        continue
                    role = []
                    if len(rep) > 1:
                        role.append(f"PP stage {stage_i}")
                    if len(stage) > 1:
                        role.append(f"TP rank {stage.index(g)}")
                    name = machine.gpu(g).name or f"GPU{g}"
                    parts.append(_memory_bar(g, name + (f" ({', '.join(role)})" if role else ""), mem, scale))
        for first, others in same.items():
            gpus_txt = ", ".join(f"GPU{g}" for d in others for stage in v.replicas[d] for g in stage)
            reps = ", ".join(map(str, others))
            parts.append(
                f'<p class="sub" data-same-as="{first}">replica{"s" if len(others) > 1 else ""} {reps} '
                f"({_e(gpus_txt)}): the same as replica {first}</p>"
            )
        parts.append("</div>")
    return "\n".join(parts)


def _link_matrix(machine: Machine, views: Sequence[DeploymentView]) -> str:
    idx = list(machine.indices)
    n = len(idx)
    cell, pad = 48, 56
    size = pad + n * cell + 8
    pos = {g: k for k, g in enumerate(idx)}
    svg = [f'<svg width="{size}" height="{size}" role="img" aria-label="link matrix" class="links">']
    for k, g in enumerate(idx):
        svg.append(
            f'<text x="{pad + k * cell + cell / 2}" y="{pad - 10}" font-size="12" font-weight="600" '
            f'text-anchor="middle">GPU{g}</text>'
        )
        svg.append(
            f'<text x="{pad - 8}" y="{pad + k * cell + cell / 2 + 4}" font-size="12" font-weight="600" '
            f'text-anchor="end">GPU{g}</text>'
        )

    present: set[str] = set()
    for a in idx:
        for b in idx:
            x, y = pad + pos[b] * cell, pad + pos[a] * cell
            if a == b:
                svg.append(
                    f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="#ffffff" stroke="#d0d7de"/>'
                    f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="12" text-anchor="middle" '
                    f'fill="#8c959f">X</text>'
                )
                continue
            kind = machine.effective_link(a, b)
            fill, fg = LINK_COLOURS.get(link_family(kind), UNKNOWN_LINK) if kind else UNKNOWN_LINK
            present.add(link_family(kind) if kind else "?")
            label = kind or "?"
            svg.append(
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" stroke="#ffffff" '
                f'data-link="{_e(label)}" data-pair="{a}-{b}"><title>GPU{a}-GPU{b}: {_e(label)}'
                f"{' (' + _e(describe_link(kind)) + ')' if kind else ' (not reported)'}</title></rect>"
                f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" font-size="11" text-anchor="middle" '
                f'fill="{fg}">{_e(label)}</text>'
            )
    outlined: list[tuple[str, str, str]] = []
    for k, v in enumerate(views):
        colour = OUTLINES[k % len(OUTLINES)]
        dash = ' stroke-dasharray="6 3"' if (k // len(OUTLINES)) % 2 else ""
        inset = 2 + 3 * (k % 5)
        groups = [g for g in v.tp_groups if len(g) > 1]
        if not groups:
            outlined.append((v.name, colour, "no TP group (TP=1)"))
            continue
        outlined.append((v.name, colour, "TP groups " + ", ".join("{" + ",".join(map(str, g)) + "}" for g in groups)))
        for group in groups:
            ks = sorted(pos[g] for g in group if g in pos)
            if not ks:
                continue
            if ks == list(range(ks[0], ks[-1] + 1)):
                boxes = [(ks[0], ks[0], ks[-1], ks[-1])]
            else:  # not adjacent in the matrix: outline each cell of the group's sub-matrix
                boxes = [(r, c, r, c) for r in ks for c in ks]
            for r0, c0, r1, c1 in boxes:
                x0, y0 = pad + c0 * cell + inset, pad + r0 * cell + inset
                w, h = (c1 - c0 + 1) * cell - 2 * inset, (r1 - r0 + 1) * cell - 2 * inset
                svg.append(
                    f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="{colour}" '
                    f'stroke-width="3"{dash} data-tp-group="{_e(v.name)}"/>'
                )
    svg.append("</svg>")
    legend = []
    for fam in (*LINK_COLOURS, "?"):
        if fam not in present:
            continue
        fill, _fg = LINK_COLOURS.get(fam, UNKNOWN_LINK)
        desc = "not reported by the source" if fam == "?" else describe_link("NV1" if fam == "NV" else fam)
        desc = "NVLink / NVSwitch (NV<n> = n links)" if fam == "NV" else desc
        legend.append(f'<span><span class="sw" style="background:{fill}"></span><b>{_e(fam)}</b> {_e(desc)}</span>')
    outline_legend = "".join(
        f'<span><span class="sw" style="background:#fff;border:3px solid {c}"></span>{_e(name)}: {_e(what)}</span>'
        for name, c, what in outlined
    )
    return (
        "<h2>Links between GPUs</h2>"
        '<p class="sub">Tensor parallel all-reduces after every layer inside a TP group: it wants NVLink. '
        "Pipeline parallel sends activations only at stage boundaries and may cross any link.</p>"
        f'<div class="legend">{"".join(legend)}</div>'
        + "".join(svg)
        + (f'<div class="legend">{outline_legend}</div>' if outline_legend else "")
    )


def _plan_table(plan: Plan, rows: Sequence[Any], full: bool = False) -> str:
    body = []
    for r in rows:
        tokens, reqs = r.predicted_kv_tokens_per_replica, r.full_length_requests
        rank = "-" if r.refused else str(plan.layouts.index(r) + 1)
        cls = ' class="refused"' if r.refused else ""
        weights = _e(_gib(r.weights_gib_per_gpu)) if r.weights_gib_per_gpu is not None else "?"
        per_token = f"{r.kv_bytes_per_token_per_rank:,}" if r.kv_bytes_per_token_per_rank else "?"
        status = (
            f'<span class="badge" style="background:{STATUS_COLOURS[Status.FAIL][0]};'
            f'color:{STATUS_COLOURS[Status.FAIL][1]}">refused</span>'
            if r.refused
            else _badge(r.status)
        )
        body.append(
            f'<tr{cls} data-layout="{_e(r.layout)}"><td class="num">{rank}</td>'
            f'<td class="layout"><b>{_e(r.layout)}</b></td><td class="st">{status}</td>'
            f'<td>{_e(",".join(map(str, r.gpus)))}</td>'
            f'<td class="num">{weights}</td><td class="num">{per_token}</td>'
            f'<td class="num">{_e(per_replica_text(tokens))}</td>'
            f'<td class="num">{_e(requests_text(reqs))}</td>'
            f'<td class="why">{_e(r.why)}</td></tr>'
        )
    return (  # status next to the layout: on a narrow window the answer is on screen, "why" scrolls
        '<div class="scroll"><table class="plan"><thead><tr><th class="num">#</th><th>layout</th><th>status</th>'
        '<th>GPUs</th><th class="num">weights GiB/GPU</th><th class="num">KV bytes/token/rank</th>'
        '<th class="num">KV pool tokens/replica</th><th class="num">full-length requests at once</th>'
        f"<th>why</th></tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _plan_section(plan: Plan) -> str:
    m = plan.model
    head = (
        f'<p class="sub">model <b>{_e(m.name)}</b> ({_e(m.source)}): '
        f"{m.num_attention_heads} attention heads, "
        f"{m.num_key_value_heads} KV heads, {m.num_hidden_layers} layers · engine {_e(plan.engine)}"
        + (f" {_e(plan.engine_version)}" if plan.engine_version else "")
        + (f" · max_model_len {plan.max_model_len:,}" if plan.max_model_len else "")
        + (f" · needs {_e(plan.required)}" if plan.required else "")
        + "</p>"
    )
    shown, hidden = plan.headline()
    table = _plan_table(plan, [*shown, *plan.closest_refused()])
    if hidden or len(plan.refused) > len(plan.closest_refused()):
        table += (
            f"<details><summary>all {len(plan.layouts)} layouts, refused ones with their reason"
            f"</summary>{_plan_table(plan, list(plan.layouts), full=True)}</details>"
        )
    extra = "".join(f'<p class="note">{_e(n)}</p>' for n in plan.notes)
    if plan.measurement:
        extra += (
            f"<h3>Needs a measurement</h3><p>{_e(plan.measurement.text)}</p><pre>{_e(plan.measurement.manifest)}</pre>"
        )
    return "<h2>Layouts, best first</h2>" + head + table + extra


def render_html(
    *,
    machine: Machine,
    results: Iterable[DeploymentView],
    plan: Plan | None = None,
    title: str = "gpulayout report",
) -> str:
    """The whole report as one HTML string (inline CSS and SVG, no script, no external resource)."""
    views = list(results)
    body = [_header(machine, title, views, plan)]
    if plan is not None:
        body.append(_plan_section(plan))
    if views:
        body.append("<h2>Verdicts</h2>" + _verdict_table(views))
    if views and any(v.memory for v in views):
        body.append(_memory_section(machine, views))
    elif views:
        body.append(
            '<h2>Memory per GPU</h2><p class="note">GPU memory is unknown for this machine source '
            f"({_e(machine.source)}): no memory bars.</p>"
        )
    body.append(_link_matrix(machine, views))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_css()}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def render_plan_html(plan: Plan, *, top: int = 3, title: str | None = None) -> str:
    """``gpulayout plan --html``: the ranked table, then the top layouts' verdicts, memory and links."""
    return render_html(
        machine=plan.machine,
        results=plan_views(plan, top),
        plan=plan,
        title=title or f"gpulayout plan: {plan.model.name}",
    )
