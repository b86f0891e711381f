"""A simulation's report: one self-contained HTML file (plots embedded as base64 PNG,
no script, no stylesheet or font from anywhere else) and the same PNGs beside it.

The first screen answers the plan designer's questions: who waits longer, who is
starved and for how long, how many reclaims and evictions and how much work they
threw away, and how far each tenant was from its deserved share; in a replay by kind,
each kind's utilisation, the GPU fragmentation and the consumers' dominant shares.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

TOP = 8  # consumers drawn one by one in the time plots; the rest are summed as "others"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def duration(s: float) -> str:
    """Seconds as a person reads them: 42 s, 3.5 min, 2.0 h, 1.5 d."""
    if s >= 86_400:
        return f"{s / 86_400:,.1f} d"
    if s >= 3600:
        return f"{s / 3600:,.1f} h"
    if s >= 60:
        return f"{s / 60:,.1f} min"
    return f"{s:,.0f} s"


KIND_NAMES = {"cores": "cores", "memory": "memory", "gpus": "GPUs"}


def kinds_text(res: dict[str, Any]) -> str:
    """A replay by kind in a sentence: each kind's utilisation over the run and the most
    allocated at once, and the GPU fragmentation (FGD's measure); "" for a replay of slots."""
    k = res.get("kinds")
    if not k:
        return ""
    most = k.get("utilisation_max", {})
    parts = [f"{KIND_NAMES.get(name, name)} {u:.1%} (most at once {most.get(name, 0.0):.1%})"
             for name, u in k["utilisation"].items()]
    text = "utilisation by kind, allocated over the run: " + ", ".join(parts)
    f = k.get("gpu_fragmentation")
    if f:
        peak = f["at_peak"]
        text += (f"; GPU fragmentation (FGD's measure: free GPU capacity a typical task cannot use) "
                 f"{f['mean']:.1%} of the GPUs on average ({f['of_free']:.1%} of those free), at most "
                 f"{f['max']:.1%}; {peak['fragmentation']:.1%} when the most GPUs were allocated "
                 f"({peak['gpus_allocated']:.1%})")
    return text


def dominant_text(line: dict[str, Any]) -> str:
    """A consumer's mean dominant share (and its largest), or "-" without kinds."""
    k = line.get("kinds")
    if not k:
        return "-"
    return f"{k['dominant_share_mean']:.2%} (max {k['dominant_share_max']:.1%})"


def _top(res: dict[str, Any]) -> list[str]:
    cs = res["consumers"]
    return sorted(cs, key=lambda p: (-cs[p]["held_mean"], p))[:TOP]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def plots(res: dict[str, Any], series: dict[str, Any]) -> dict[str, bytes]:
    """name -> PNG bytes: utilisation, held vs deserved, waits, shortfall and lost work."""
    plt = _plt()
    out: dict[str, bytes] = {}
    days = [t / 86_400 for t in series.get("t", [])]
    cs = res["consumers"]
    top = _top(res)

    fig, ax = plt.subplots(figsize=(9, 2.6))
    ax.plot(days, [u * 100 for u in series.get("utilisation", [])], lw=1)
    ax.set_ylabel("utilisation %")
    ax.set_xlabel("days")
    ax.set_ylim(0, 105)
    ax.set_title(f"Utilisation over time (mean {res['utilisation']:.1%})")
    out["utilisation"] = _png(fig)

    fig, ax = plt.subplots(figsize=(9, 3.6))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, p in enumerate(top):
        c = colours[i % len(colours)]
        ax.plot(days, series["held"].get(p, []), lw=1, color=c, label=f"{p} allocated")
        ax.plot(days, series["deserved"].get(p, []), lw=1, ls="--", color=c)
    rest = [p for p in series.get("held", {}) if p not in top]
    if rest and days:
        ax.plot(days, [sum(series["held"][p][k] for p in rest) for k in range(len(days))], lw=1, color="grey",
                label=f"{len(rest)} others allocated")
    ax.set_ylabel("slots (dashed: deserved)")
    ax.set_xlabel("days")
    ax.set_title("Allocated against deserved")
    ax.legend(fontsize=7, ncol=2, loc="upper right")
    out["held_vs_deserved"] = _png(fig)

    kinds = series.get("kinds")
    if kinds and days:
        fig, ax = plt.subplots(figsize=(9, 2.8))
        for name, values in kinds["utilisation"].items():
            ax.plot(days, [u * 100 for u in values], lw=1, label=f"{KIND_NAMES.get(name, name)} allocated")
        if kinds.get("gpu_fragmentation") is not None:
            ax.plot(days, [u * 100 for u in kinds["gpu_fragmentation"]], lw=1, ls="--", color="tab:red",
                    label="GPUs fragmented (FGD)")
        ax.set_ylabel("% of the cluster")
        ax.set_xlabel("days")
        ax.set_ylim(0, 105)
        ax.set_title("By kind over time")
        ax.legend(fontsize=7, loc="upper right")
        out["kinds"] = _png(fig)

    names = sorted(cs, key=lambda p: -cs[p]["wait"]["mean"])[:20]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(names) + 1.2))
    y = range(len(names))
    ax.barh([k + 0.2 for k in y], [cs[p]["wait"]["p95"] / 3600 for p in names], height=0.4, label="p95")
    ax.barh([k - 0.2 for k in y], [cs[p]["wait"]["mean"] / 3600 for p in names], height=0.4, label="mean")
    ax.set_yticks(list(y), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("wait, hours")
    ax.set_title("Who waits longest")
    ax.legend(fontsize=7)
    out["waits"] = _png(fig)

    names = sorted(cs, key=lambda p: -(cs[p]["shortfall_seconds"] + cs[p]["lost_slot_seconds"]))[:20]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 0.3 * len(names) + 1.2), sharey=True)
    y = list(range(len(names)))
    a1.barh(y, [cs[p]["shortfall_seconds"] / 3600 for p in names], label="below deserved, jobs waiting")
    a1.barh(y, [cs[p].get("starved_seconds", 0) / 3600 for p in names], label="nothing allocated, jobs waiting")
    a1.set_yticks(y, names, fontsize=7)
    a1.invert_yaxis()
    a1.set_xlabel("hours")
    a1.set_title("Shortfall and starvation")
    a1.legend(fontsize=7)
    a2.barh(y, [cs[p]["lost_slot_seconds"] / 3600 for p in names], color="tab:red")
    a2.set_xlabel("slot-hours lost to evictions")
    a2.set_title("Work lost")
    out["shortfall_and_lost"] = _png(fig)
    return out


def _table(rows: list[list[str]], head: list[str]) -> str:
    h = "".join(f"<th>{html.escape(x)}</th>" for x in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def dropped_text(res: dict[str, Any]) -> str:
    """The trace's jobs left out before the replay, by reason, and the bad lines skipped;
    "" when none."""
    parts = []
    dropped = res.get("dropped") or {}
    if dropped:
        why = ", ".join(f"{n:,} {reason}" for reason, n in sorted(dropped.items(), key=lambda kv: -kv[1]))
        parts.append(f"{sum(dropped.values()):,} jobs of the trace dropped before the replay ({why})")
    if res.get("skipped_lines"):
        first = res.get("skipped_first") or []
        parts.append(f"{res['skipped_lines']:,} bad lines skipped (--skip-bad)"
                     + (f", the first: {first[0]}" if first else ""))
    if res.get("unrunnable"):
        parts.append(f"{res['unrunnable']:,} jobs wider than their consumer may ever use (unrunnable)")
    return "; ".join(parts)


def _answers(res: dict[str, Any]) -> list[str]:
    cs = res["consumers"]
    active = [p for p in cs if cs[p]["jobs"] or cs[p].get("never_started")]
    out = []
    stranded = res.get("never_started", 0)
    if stranded:
        worst = sorted((p for p in cs if cs[p].get("never_started")), key=lambda p: -cs[p]["never_started"])
        names = ", ".join(f"{html.escape(p)} ({cs[p]['never_started']:,})" for p in worst[:5])
        out.append(f"<b>Never started:</b> {stranded:,} jobs were still waiting when nothing was left to run "
                   f"or arrive: {names}{' ...' if len(worst) > 5 else ''} (docs/simulate.md, \"The model\"). "
                   "Their waits count as censored (at least the end of the run less their submission) in "
                   "the waits, slowdowns and finish-time fairness below.")
    dropped = dropped_text(res)
    if dropped:
        out.append(f"<b>Left out:</b> {html.escape(dropped)}.")
    by_kind = kinds_text(res)
    if by_kind:
        top = sorted(cs, key=lambda p: -(cs[p].get("kinds") or {}).get("dominant_share_mean", 0.0))[:3]
        most = ", ".join(f"{html.escape(p)} {dominant_text(cs[p])}" for p in top)
        out.append(f"<b>By kind:</b> {html.escape(by_kind)}. The largest mean dominant shares: {most}.")
    if not active:
        return [*out, "No job finished."]
    waits = sorted(active, key=lambda p: -cs[p]["wait"]["mean"])
    w = waits[0]
    never = " (a lower bound: some of its jobs never started)" if cs[w].get("never_started") else ""
    served = [p for p in waits if not cs[p].get("never_started")]
    if served:
        least = served[-1]
        shortest = f"the shortest: {html.escape(least)}, {duration(cs[least]['wait']['mean'])}."
    else:
        shortest = "every consumer with work has jobs that never started."
    out.append(f"<b>Who waits longest:</b> {html.escape(w)}, {duration(cs[w]['wait']['mean'])} on average{never} "
               f"(p95 {duration(cs[w]['wait']['p95'])}, bounded slowdown {cs[w]['bounded_slowdown']['mean']:.2f}); "
               f"{shortest}")
    starved = sorted(active, key=lambda p: -cs[p]["shortfall_seconds"])
    s = starved[0]
    if cs[s]["shortfall_seconds"] > 0:
        out.append(f"<b>Who is starved:</b> {html.escape(s)} was allocated less than it deserved while its jobs "
                   f"waited for {duration(cs[s]['shortfall_seconds'])} in all, nothing at all for "
                   f"{duration(cs[s].get('starved_seconds', 0))}.")
    else:
        out.append("<b>Who is starved:</b> nobody was allocated less than it deserved while its jobs waited.")
    out.append(f"<b>Reclaims and evictions:</b> {res['reclaims']:,} reclaims, {res['evictions']:,} evictions "
               f"({res['evictions'] / max(res['makespan'] / 3600, 1e-9):.2f} per hour), "
               f"{res['lost_slot_seconds'] / 3600:,.1f} slot-hours of work thrown away.")
    f = res["fairness"]
    dev = sorted(active, key=lambda p: -cs[p].get("deviation_mean", 0))
    out.append(f"<b>Distance from deserved:</b> Jain's index {f['jain']:.3f} over held / deserved; the "
               f"largest mean deviation is {f['max_deviation']:.1%} of the cluster "
               f"({html.escape(dev[0])}), the mean {f['mean_deviation']:.1%}.")
    return out


def baselines_html(res: dict[str, Any]) -> str:
    """The plan's figures beside the baselines' (``--baseline``), as a table; "" without."""
    base = res.get("baselines") or {}
    if not base:
        return ""
    rows = []
    for name, r in [("plan", res), *base.items()]:
        w = r["wait"]
        rows.append([name, f"{r['jobs']:,}", f"{r.get('never_started', 0):,}", f"{r['utilisation']:.1%}",
                     duration(r["makespan"]), duration(w["mean"]), duration(w["p95"])])
    return "</p>" + _table(rows, ["scheduler", "jobs", "never started", "utilisation", "makespan",
                                  "wait mean", "wait p95"]) + "<p>"


def render_html(res: dict[str, Any], pngs: dict[str, bytes], title: str = "apportion simulate") -> str:
    cs = res["consumers"]
    by_kind = bool(res.get("kinds"))
    rows = []
    for p in sorted(cs, key=lambda p: -cs[p]["wait"]["mean"]):
        c = cs[p]
        f = c["finish_time_fairness"]
        rows.append([p, f"{c['jobs']:,}", f"{c.get('never_started', 0):,}", duration(c["wait"]["mean"]),
                     duration(c["wait"]["p95"]),
                     f"{c['bounded_slowdown']['mean']:.2f}", f"{c['held_mean']:,.1f}", f"{c['deserved_mean']:,.1f}",
                     duration(c["shortfall_seconds"]), f"{c['reclaims']:,}", f"{c['evictions']:,}",
                     f"{c['lost_slot_seconds'] / 3600:,.1f}", "-" if f is None else f"{f:.2f}"]
                    + ([dominant_text(c)] if by_kind else []))
    imgs = "".join(
        f'<figure><img alt="{html.escape(k)}" src="data:image/png;base64,{base64.b64encode(v).decode()}">'
        f"</figure>" for k, v in pngs.items())
    answers = "".join(f"<li>{a}</li>" for a in _answers(res))
    head = (f"{res['jobs']:,} jobs, makespan {duration(res['makespan'])}, utilisation {res['utilisation']:.1%}; "
            f"plan {html.escape(str(res.get('plan', '')))}, trace {html.escape(str(res.get('trace', '')))}")
    head += baselines_html(res)
    table = _table(rows, ["consumer", "jobs", "never started", "wait mean", "wait p95", "bounded slowdown",
                          "allocated (mean)",
                          "deserved (mean)", "shortfall", "reclaims", "evictions", "slot-h lost",
                          "finish-time fairness"] + (["dominant share (mean)"] if by_kind else []))
    style = ("body{font-family:sans-serif;margin:1.5em;max-width:1100px}table{border-collapse:collapse;"
             "font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}li{margin:.3em 0}img{max-width:100%}")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1><p>{head}</p>"
            f"<ul>{answers}</ul>{table}{imgs}"
            "<p>Definitions: docs/simulate.md. Held and deserved are time-weighted means over the run; shortfall "
            "is time with jobs waiting and less held than deserved; finish-time fairness is the consumer's span "
            "under sharing over its span alone on its entitled slice"
            + ("; a consumer's dominant share is the largest, over the kinds, of what it holds of the cluster's "
               "total (Dominant Resource Fairness)" if by_kind else "") + ".</p></body></html>")


def write_report(out: Path, res: dict[str, Any], series: dict[str, Any], name: str = "report.html") -> Path:
    """report.html and one PNG per plot in ``out``; the HTML's path."""
    out.mkdir(parents=True, exist_ok=True)
    pngs = plots(res, series)
    for k, v in pngs.items():
        (out / f"{k}.png").write_bytes(v)
    path = out / name
    path.write_text(render_html(res, pngs), encoding="utf-8")
    return path
