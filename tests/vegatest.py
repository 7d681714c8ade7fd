"""Reading the pages' live charts (Vega-Lite, pages/ui.py) in AppTest and in Chromium."""

import json

import pyarrow as pa


def vega_charts(at) -> list[dict]:
    """Every Vega-Lite chart the page drew, in order: its title, its spec as Streamlit sends it (JSON text and
    dict) and its named datasets as DataFrames."""
    charts = []
    for element in at.get("vega_lite_chart"):
        proto = element.proto
        spec = json.loads(proto.spec)
        title = spec.get("title")
        charts.append({"title": title.get("text") if isinstance(title, dict) else title, "spec_text": proto.spec,
                       "spec": spec, "datasets": {dataset.name: pa.ipc.open_stream(dataset.data.data).read_all()
                                                  .to_pandas() for dataset in proto.datasets}})
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


# In Chromium: a live chart by its title (the current run's, not a stale one), read from Vega's SVG, where each
# mark's element carries its row (`__data__.datum`): the points of each series, the rules' values, heatmap
# cells, the axes' titles, and its <svg> (to check that a new frame updated it rather than replaced it).
VEGA_CHART_JS = """title => {
    const titled = c => { const text = (c.querySelector('.role-title-text') || {}).textContent || '';
        return text === title || (text.endsWith('…') && title.startsWith(text.slice(0, -1))); };  // a long title is cut
    const chart = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
        .find(c => !c.closest('[data-stale="true"]') && titled(c));
    if (!chart) return null;
    const rows = selector => [...chart.querySelectorAll(selector)].map(e => e.__data__ && e.__data__.datum).filter(Boolean);
    const series = {};
    for (const d of rows('.role-mark.mark-symbol path'))
        (series[d.series] = series[d.series] || []).push([d.x, d.y]);
    for (const points of Object.values(series)) points.sort((a, b) => a[0] - b[0]);
    const axis = letter => { const a = [...chart.querySelectorAll('g.role-axis')]
        .find(g => (g.getAttribute('aria-label') || '').startsWith(letter + '-axis'));
        const t = a && a.querySelector('.role-axis-title text'); return t ? t.textContent : null; };
    return {series: Object.fromEntries(Object.entries(series).map(([name, points]) =>
                [name, {x: points.map(p => p[0]), y: points.map(p => p[1])}])),
            rules: rows('.role-mark.mark-rule line').map(d => d.value),
            cells: rows('.role-mark.mark-rect path').map(d => [d.x, d.y, d.z]),
            lines: [...chart.querySelectorAll('.role-mark.mark-line path')].map(p => p.getAttribute('d')),
            x_title: axis('X'), y_title: axis('Y')};
}"""
