"""The report's plots, made with Plotly (figures as JSON; the page inlines plotly.js once, so it opens offline).

Plotly draws in the reader's browser, so a 1,000-question report is written in well under a second of
plotting, and every chart can be hovered and zoomed. Each function returns a figure as plain JSON
(`fig.to_plotly_json()`), which the page hands to `Plotly.newPlot`.
"""

from __future__ import annotations

from typing import Any

#: One colour per run, in the order runs are given (Plotly's default qualitative sequence).
COLOURS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")


def _colour(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def _json(fig: Any) -> dict[str, Any]:
    import json

    import plotly.io as pio

    return json.loads(pio.to_json(fig, validate=False, engine="json"))


def hits_by_group(groups: dict[str, dict[str, list[dict[str, Any]]]], key: str) -> dict[str, Any]:
    """Hits@1 per value of `key` (hops, type, level) for each run, with 95% Wilson intervals as error bars."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for index, (run, by_key) in enumerate(groups.items()):
        entries = by_key.get(key) or []
        fig.add_trace(go.Bar(
            name=run, x=[f"{key}={e['value']}" for e in entries], y=[e["hits@1"] for e in entries],
            marker_color=_colour(index),
            error_y={"type": "data", "symmetric": False, "array": [e["high"] - e["hits@1"] for e in entries],
                     "arrayminus": [e["hits@1"] - e["low"] for e in entries]},
            customdata=[[e["n"], e["hits"], e["low"], e["high"]] for e in entries],
            hovertemplate="%{x}: Hits@1 %{y:.3f} [%{customdata[2]:.3f}, %{customdata[3]:.3f}] "
                          "(%{customdata[1]} of %{customdata[0]})<extra>" + run + "</extra>",
        ))
    fig.update_layout(title=f"Hits@1 by {key} (95% Wilson intervals)", barmode="group", yaxis_range=[0, 1.05],
                      height=340, margin={"t": 50, "b": 40, "l": 50, "r": 20}, legend={"orientation": "h"})
    return _json(fig)


def cost_distributions(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Histograms of LM calls, tokens and seconds per question, one colour per run."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    quantities = (("LM calls / question", "call_num"), ("tokens / question", "total_token"),
                  ("seconds / question", "time"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[q[0] for q in quantities])
    for index, (run, rows) in enumerate(runs.items()):
        for column, (_, key) in enumerate(quantities, 1):
            fig.add_trace(go.Histogram(x=[float(r.get(key) or 0) for r in rows], name=run, legendgroup=run,
                                       showlegend=column == 1, marker_color=_colour(index), opacity=0.65),
                          row=1, col=column)
    fig.update_layout(barmode="overlay", height=320, margin={"t": 50, "b": 40, "l": 50, "r": 20},
                      legend={"orientation": "h"}, title="Cost per question")
    return _json(fig)


def correction_bars(effects: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Hits@1 of the questions each kind of correction touched (with intervals), bars labelled with counts."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for index, (run, entries) in enumerate(effects.items()):
        fig.add_trace(go.Bar(
            name=run, x=[e["kind"] for e in entries], y=[e["hits@1"] for e in entries], marker_color=_colour(index),
            text=[f"n={e['n']}" for e in entries], textposition="outside",
            error_y={"type": "data", "symmetric": False, "array": [e["high"] - e["hits@1"] for e in entries],
                     "arrayminus": [e["hits@1"] - e["low"] for e in entries]},
        ))
    fig.update_layout(title="Hits@1 of the questions each correction touched (95% Wilson intervals)",
                      barmode="group", yaxis_range=[0, 1.15], height=340,
                      margin={"t": 50, "b": 40, "l": 50, "r": 20}, legend={"orientation": "h"})
    return _json(fig)


def difference_forest(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each run's difference from the baseline per metric (points) with 95% paired bootstrap intervals."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    metrics = list(pairs[0]["differences"]) if pairs else []
    fig = make_subplots(rows=1, cols=len(metrics) or 1, subplot_titles=metrics, horizontal_spacing=0.04)
    for index, pair in enumerate(pairs, 1):
        label = f"{pair['other']} - {pair['baseline']}"
        for column, metric in enumerate(metrics, 1):
            d = pair["differences"][metric]
            fig.add_trace(go.Scatter(
                x=[d["difference"]], y=[label], mode="markers", marker={"size": 10, "color": _colour(index)},
                error_x={"type": "data", "symmetric": False, "array": [d["high"] - d["difference"]],
                         "arrayminus": [d["difference"] - d["low"]]},
                name=label, legendgroup=label, showlegend=column == 1,
                hovertemplate=f"{metric}: %{{x:.3f}} [{d['low']:.3f}, {d['high']:.3f}]<extra>{label}</extra>",
            ), row=1, col=column)
            fig.add_vline(x=0, line_dash="dot", line_color="#888", row=1, col=column)
        fig.update_yaxes(showticklabels=False)
    fig.update_layout(title="Differences from the first run on the shared questions (95% paired bootstrap)",
                      height=160 + 40 * len(pairs), margin={"t": 70, "b": 30, "l": 20, "r": 20},
                      legend={"orientation": "h"})
    return _json(fig)
