"""Reading the pages' live charts (Vega-Lite, views/common) in AppTest and in Chromium."""

import base64
import json
import struct
import zlib

import numpy as np
import pyarrow as pa

from views.common.animation import sent as player_document


def vega_charts(at) -> list[dict]:
    """Every Vega-Lite chart the page drew, in order: its title, its spec as Streamlit sends it (JSON text and
    dict) and its named datasets as DataFrames."""
    charts = []
    for element in at.get("vega_lite_chart"):
        proto = element.proto
        spec = json.loads(proto.spec)
        title = spec.get("title")
        charts.append(
            {
                "title": title.get("text") if isinstance(title, dict) else title,
                "spec_text": proto.spec,
                "spec": spec,
                "datasets": {
                    dataset.name: pa.ipc.open_stream(dataset.data.data).read_all().to_pandas()
                    for dataset in proto.datasets
                },
            }
        )
    return charts


def player_charts(at) -> list[dict]:
    """Every chart of the page's players played in the browser (views/common/animation.py), in order: its title and
    its spec, as the page sends them (their data come frame by frame, apart)."""
    charts = []
    for element in at.get("bidi_component"):
        if element.proto.component_name != "symlab_player":
            continue
        for chart in player_document(element.proto)["charts"]:
            title = chart["spec"].get("title")
            charts.append({"title": title.get("text") if isinstance(title, dict) else title, "spec": chart["spec"]})
    return charts


def vega_chart(at, title: str) -> dict:
    [chart] = [chart for chart in vega_charts(at) if chart["title"] == title]
    return chart


def layers(spec: dict):
    """Every single view of a (layered, concatenated) spec."""
    children = [child for key in ("layer", "hconcat", "vconcat", "concat") for child in spec.get(key, [])]
    if not children:
        yield spec
    for child in children:
        yield from layers(child)


def channel(spec: dict, name: str) -> list[dict]:
    """The definitions of encoding channel ``name`` across the spec's views."""
    return [view["encoding"][name] for view in layers(spec) if name in view.get("encoding", {})]


# In Chromium: a live chart (Streamlit's, or one of a player's played in the browser) by its title (the current
# run's, not a stale one), read from Vega's SVG, where each mark's element carries its row (`__data__.datum`): the
# points of each series, the rules' values, heatmap cells, images (their data URLs), the axes' titles, and its <svg>
# (to check that a new frame updated it rather than replaced it).
VEGA_CHART_JS = """title => {
    const titled = c => { const text = (c.querySelector('.role-title-text') || {}).textContent || '';
        return text === title || (text.endsWith('…') && title.startsWith(text.slice(0, -1))); };  // a long title is cut
    const chart = [...document.querySelectorAll('[data-testid="stVegaLiteChart"], .symlab-player .chart')]
        .find(c => !c.closest('[data-stale="true"]') && titled(c));
    if (!chart) return null;
    const rows = selector => [...chart.querySelectorAll(selector)].map(e => e.__data__ && e.__data__.datum).filter(Boolean);
    const series = {};
    for (const d of rows('.role-mark.mark-symbol path'))
        (series[d.series] = series[d.series] || []).push([d.x, d.y]);
    for (const points of Object.values(series)) points.sort((a, b) => a[0] - b[0]);
    const axis = letter => { const a = [...chart.querySelectorAll('g.role-axis')]
        .find(g => (g.getAttribute('aria-label') || '').startsWith(letter + '-axis'));
        const t = a && a.querySelector('.role-axis-title text');  // a title on two lines: a tspan each
        if (!t) return null;
        const lines = [...t.querySelectorAll('tspan')].map(s => s.textContent);
        return lines.length ? lines.join(' ') : t.textContent; };
    return {series: Object.fromEntries(Object.entries(series).map(([name, points]) =>
                [name, {x: points.map(p => p[0]), y: points.map(p => p[1])}])),
            rules: rows('.role-mark.mark-rule line').map(d => d.value),
            cells: rows('.role-mark.mark-rect path').map(d => [(d.x0 + d.x1) / 2, (d.y0 + d.y1) / 2, d.z]),
            lines: [...chart.querySelectorAll('.role-mark.mark-line path')].map(p => p.getAttribute('d')),
            images: [...chart.querySelectorAll('.role-mark.mark-image image')].map(i => i.getAttribute('href')),
            x_title: axis('X'), y_title: axis('Y')};
}"""


def png_rows(url: str) -> np.ndarray:
    """The pixels (rows from the top, RGB) of an image chart's PNG data URL (views/common: image_frame)."""
    data = base64.b64decode(url.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    body, at = b"", 8
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at : at + 4]), data[at + 4 : at + 8]
        if kind == b"IDAT":
            body += data[at + 8 : at + 8 + length]
        at += 12 + length
    raw = np.frombuffer(zlib.decompress(body), np.uint8).reshape(height, 1 + 3 * width)
    assert not raw[:, 0].any()  # no row filters
    return raw[:, 1:].reshape(height, width, 3)


def image_values(url: str, colours) -> np.ndarray:
    """The values behind an image chart's PNG (views/common: image_frame), as fractions of its colour range
    (0 at ``colours[0]``, 1 at the last), ``z[y, x]`` with the smallest y first: each pixel's nearest colour on
    the scale, to within one step in 1024."""
    stops = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in colours], float)
    t = np.linspace(0.0, 1.0, 1025)
    scale = np.stack([np.interp(t, np.linspace(0.0, 1.0, len(stops)), stops[:, k]) for k in range(3)], axis=-1)
    pixels = png_rows(url)[::-1].astype(float)
    nearest = ((pixels[..., None, :] - scale) ** 2).sum(axis=-1).argmin(axis=-1)
    return t[nearest]
