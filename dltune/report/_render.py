"""Reports as one self-contained HTML file (images inlined) or Markdown with PNGs beside it."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from dltune.report._model import Figure, Report, Table

__all__ = ["render_html", "render_markdown"]

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1150px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.86em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
caption{caption-side:top;text-align:left;font-weight:600;padding:.3em 0}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.88em;color:#555}.note{font-size:.85em;color:#555}
ul.findings li{margin:.25em 0}.meta{font-size:.9em;color:#444}
"""


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in t.rows)
    note = f'<p class="note">{html.escape(t.note)}</p>' if t.note else ""
    return (f'<table id="table-{t.name}"><caption>{html.escape(t.title)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}")


def _html_figure(f: Figure) -> str:
    data = base64.b64encode(f.png).decode("ascii")
    caption = html.escape(f.title + (". " + f.caption if f.caption else ""))
    return (f'<figure id="figure-{f.name}"><img alt="{html.escape(f.title)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{caption}</figcaption></figure>')


def render_html(report: Report) -> str:
    """The whole report as one HTML page with every image inlined (works offline)."""
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{html.escape(report.title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(report.title)}</h1>",
             '<div class="meta"><ul>' + "".join(f"<li>{html.escape(m)}</li>" for m in report.meta)
             + "</ul></div>",
             "<h2>Findings</h2>",
             '<ul class="findings">' + "".join(f"<li>{html.escape(f.text)}</li>" for f in report.findings)
             + "</ul>"]
    for section in report.sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        for item in section.items:
            if isinstance(item, Table):
                parts.append(_html_table(item))
            elif isinstance(item, Figure):
                parts.append(_html_figure(item))
            else:
                parts.append(f'<p class="note">{html.escape(str(item))}</p>')
    parts.append("</body></html>")
    return "\n".join(parts)


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(t: Table) -> str:
    lines = [f"**{t.title}**", "", "| " + " | ".join(_md_cell(c) for c in t.columns) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(t.columns))) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    if t.note:
        lines += ["", f"_{t.note}_"]
    return "\n".join(lines)


def render_markdown(report: Report, folder: Path) -> str:
    """The report as Markdown; writes each figure as a PNG into ``folder`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = [f"# {report.title}", "", "\n".join(f"- {m}" for m in report.meta), "", "## Findings", "",
             "\n".join(f"- {f.text}" for f in report.findings)]
    for section in report.sections:
        parts += ["", f"## {section.title}", ""]
        for item in section.items:
            if isinstance(item, Table):
                parts += [_md_table(item), ""]
            elif isinstance(item, Figure):
                (folder / item.filename).write_bytes(item.png)
                caption = item.title + (". " + item.caption if item.caption else "")
                parts += [f"![{item.title}]({item.filename})", "", f"_{caption}_", ""]
            else:
                parts += [f"_{item}_", ""]
    return "\n".join(parts).rstrip() + "\n"
