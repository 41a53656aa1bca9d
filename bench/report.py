"""Results into words and pictures: the targets with PASS/FAIL, the console
table (every memoryui figure beside its baseline and the ratio), the
Markdown report and the plot of latency and throughput against store size.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

TARGETS_SIZE_NOTE = "targets are set at 1M stored; judged here at the largest size measured"


def cpu_probe_ms() -> float:
    """How fast this machine's core runs Python right now: the best of five
    timings of ``sum(range(10**6))``, in ms (about 8 on a typical core of
    this machine kind, 15 to 35 when the machine is shared; CPU figures
    scale with it). Taken at the start and at each size, so that runs, and
    sizes within a run, can be compared."""
    import timeit

    return round(min(timeit.repeat("sum(range(10**6))", number=10, repeat=5)) / 10 * 1000, 1)


def machine() -> dict:
    """CPU count, memory, Python and PostgreSQL versions, load average, and
    :func:`cpu_probe_ms`."""
    import psutil

    info = {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2 ** 30, 1),
            "python": platform.python_version(), "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
            "cpu_probe_ms_at_start": cpu_probe_ms()}
    try:
        import psycopg

        from bench.database import maintenance_url

        with psycopg.connect(maintenance_url(os.environ.get("DATABASE_URL", "")), connect_timeout=5) as conn:
            info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    except Exception as exc:  # informational only
        info["postgresql"] = f"unknown ({type(exc).__name__})"
    return info


def _get(d: dict | None, *path, default=None):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


def targets(results: dict) -> list[dict]:
    """The issue's targets, judged on the largest size measured (and, for
    scaling, the smallest). Each: ``{"target", "value", "pass", "at"}``;
    ``pass`` is ``None`` when the figure is missing."""
    sizes = results.get("sizes") or []
    if not sizes:
        return []
    big, small = sizes[-1], sizes[0]
    at = big["size"]
    out = []

    def add(name: str, value, ok, note: str = "") -> None:
        out.append({"target": name, "value": value, "pass": ok, "at": at, "note": note})

    rate = _get(big, "batch", "assertions_per_second")
    add("batch ingest >= 2,000 assertions/s", rate, None if rate is None else rate >= 2000)
    plain = _get(big, "baseline_insert", "rows_per_second")
    slow = round(plain / rate, 2) if rate and plain else None
    add("batch ingest within 5x of one INSERT per row (plain/memoryui)", slow, None if slow is None else slow <= 5)
    single = _get(big, "webhook_single", "latency", "p95_ms")
    add("signed webhook p95 <= 15 ms (one connection)", single, None if single is None else single <= 15,
        "" if single is not None else "not measured (--webhook-single-slice 0)")
    hook = _get(big, "webhook", "latency", "p95_ms")
    paced = _get(big, "webhook_paced") or {}
    add(f"signed webhook p95 <= 15 ms ({results.get('config', {}).get('clients', '?')} concurrent clients)", hook,
        None if hook is None else hook <= 15,
        f"at {_percent(paced['offered_load'])} of that rate ({_fmt(paced['offered_per_second'])} webhooks/s "
        f"offered) p95 is {_fmt(_get(paced, 'latency', 'p95_ms'), 2)} ms" if paced else "")
    now = _get(big, "reads", "facts_now", "memoryui", "p95_ms")
    add("facts-now p95 <= 10 ms", now, None if now is None else now <= 10)
    r = _get(big, "reads", "facts_now", "ratio_p95")
    floor, base = _get(big, "reads", "http_floor", "memoryui", "p95_ms"), _get(big, "reads", "facts_now", "baseline",
                                                                              "p95_ms")
    add("facts-now p95 within 3x of plain indexed SELECT", r, None if r is None else r <= 3,
        f"the HTTP floor alone (a 404, no database work) is {floor / base:.1f}x the plain SELECT's p95"
        if floor and base else "")
    as_of = [_get(big, "reads", k, "memoryui", "p95_ms") for k in ("as_of_valid", "as_of_known")]
    worst = max((x for x in as_of if x is not None), default=None)
    add("as-of p95 <= 25 ms (worst of past valid time, past transaction time)", worst,
        None if worst is None else worst <= 25)
    if len(sizes) > 1:
        first = _get(small, "batch", "assertions_per_second")
        share = round(rate / first, 2) if rate and first else None
        add(f"throughput at {at} >= 80% of throughput at {small['size']}", share,
            None if share is None else share >= 0.8)
    else:
        add("throughput at 1M >= 80% of throughput at 10k", None, None, "needs two sizes")
    dash = results.get("dashboard") or {}
    pages = dash.get("pages") or {}
    if not pages:
        add("dashboard page, 5,000 memories, <= 150 ms server time", None, None, dash.get("skipped", "not measured"))
        add("dashboard query count independent of memories", None, None, dash.get("skipped", "not measured"))
    else:
        top = max(pages, key=int)
        p95 = _get(pages, top, "server", "p95_ms")
        add(f"dashboard page, {int(top):,} memories, <= 150 ms server time (p95)", p95, None if p95 is None else p95 <= 150)
        counts = {n: tuple(v["queries"]) for n, v in pages.items()}
        flat = len({c for pair in counts.values() for c in pair}) == 1
        add("dashboard query count independent of memories",
            ", ".join(f"{int(n):,}: {c[0]}" for n, c in sorted(counts.items(), key=lambda x: int(x[0]))), flat)
    return out


def _verdict(ok) -> str:
    return "PASS" if ok is True else "FAIL" if ok is False else "n/a"


def command_line(cfg: dict) -> str:
    """``python -m bench.run`` with the options of the run that differ from
    their defaults (``cfg``: the run's ``config``)."""
    from bench.run import _relative, parse_args

    defaults = vars(parse_args([]))
    parts = ["python -m bench.run", f"--sizes {cfg.get('sizes')}"]
    for name, value in cfg.items():
        if name in ("sizes", "size_list") or name not in defaults:
            continue
        default = defaults[name]
        if isinstance(default, Path):
            default = _relative(default)
        if value == default:
            continue
        flag = "--" + name.replace("_", "-")
        parts.append(flag if value is True else f"{flag} {value}")
    return " ".join(parts)


def _percent(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def _fmt(x, digits: int = 1) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


READ_NAMES = {"facts_now": "facts-now", "context": "context", "history": "history of a key",
              "as_of_valid": "as-of past valid time", "as_of_known": "as-of past transaction time"}


def figure_rows(size: dict) -> list[tuple[str, str, str, str]]:
    """``(figure, memoryui, baseline, ratio)`` rows for one size."""
    rows = []
    b, p = size.get("batch") or {}, size.get("baseline_insert") or {}
    rate, plain = b.get("assertions_per_second"), p.get("rows_per_second")
    rows.append(("batch ingest, assertions/s (vs one INSERT per row)", _fmt(rate), _fmt(plain),
                 _fmt(round(plain / rate, 2) if rate and plain else None, 2) + "x slower"))
    copy = _get(size, "baseline_copy", "rows_per_second")
    rows.append(("batch ingest, assertions/s (vs COPY)", _fmt(rate), _fmt(copy),
                 _fmt(round(copy / rate, 2) if rate and copy else None, 2) + "x slower"))
    w, wp = size.get("webhook") or {}, size.get("baseline_insert_commit") or {}
    rows.append(("signed webhooks, assertions/s (vs INSERT+COMMIT per row)", _fmt(w.get("assertions_per_second")),
                 _fmt(wp.get("rows_per_second")),
                 _fmt(round(wp["rows_per_second"] / w["assertions_per_second"], 2)
                      if w.get("assertions_per_second") and wp.get("rows_per_second") else None, 2) + "x slower"))
    for q in ("p50_ms", "p95_ms", "p99_ms"):
        a, c = _get(w, "latency", q), _get(wp, "latency", q)
        rows.append((f"signed webhook latency {q[:3]}, ms", _fmt(a, 2), _fmt(c, 2),
                     _fmt(round(a / c, 2) if a and c else None, 2) + "x"))
    one, one_plain = size.get("webhook_single") or {}, size.get("baseline_insert_commit_single") or {}
    for q in ("p50_ms", "p95_ms", "p99_ms") if one else ():
        a, c = _get(one, "latency", q), _get(one_plain, "latency", q)
        rows.append((f"signed webhook latency {q[:3]}, one connection, ms", _fmt(a, 2), _fmt(c, 2),
                     _fmt(round(a / c, 2) if a and c else None, 2) + "x"))
    paced = size.get("webhook_paced") or {}
    for q in ("p50_ms", "p95_ms", "p99_ms") if paced else ():
        rows.append((f"signed webhook latency {q[:3]} at {_fmt(paced.get('offered_per_second'))} webhooks/s "
                     f"offered ({_percent(paced.get('offered_load'))} of the {_fmt(_get(w, 'events_per_second'))} "
                     f"webhooks/s of the concurrent clients), ms",
                     _fmt(_get(paced, "latency", q), 2), "-", "-"))
    floor = _get(size, "reads", "http_floor", "memoryui") or {}
    for q in ("p50_ms", "p95_ms") if floor else ():
        rows.append((f"HTTP floor (404 from Django, no database) {q[:3]}, ms", _fmt(floor.get(q), 2), "-", "-"))
    for kind, name in READ_NAMES.items():
        r = _get(size, "reads", kind) or {}
        for q in ("p50_ms", "p95_ms", "p99_ms"):
            a, c = _get(r, "memoryui", q), _get(r, "baseline", q)
            rows.append((f"{name} {q[:3]}, ms", _fmt(a, 2), _fmt(c, 2), _fmt(round(a / c, 1) if a and c else None, 1) + "x"))
    return rows


def console_table(results: dict) -> str:
    """Plain-text tables: per size, figures beside baselines; then targets."""
    lines = []
    for size in results.get("sizes", []):
        lines.append(f"\n== {size['size']} stored ({_fmt(size.get('stored_before'))} assertions before the measured "
                     f"slices; preload: {_get(size, 'preload', 'mode')}) ==")
        lines.append(f"{'figure':62} {'memoryui':>12} {'baseline':>12}  ratio")
        for fig, mine, base, r in figure_rows(size):
            lines.append(f"{fig:62} {mine:>12} {base:>12}  {r}")
        lines.append(f"peak RSS during build+ingest: {size.get('rss_peaks')}")
    dash = results.get("dashboard") or {}
    if "skipped" in dash:
        lines.append(f"\ndashboard: {dash['skipped']}")
    for n, d in sorted((dash.get("pages") or {}).items(), key=lambda x: int(x[0])):
        lines.append(f"dashboard page, {int(n):,} memories ({_fmt(dash.get('stored'))} stored): server p50 "
                     f"{d['server']['p50_ms']} / p95 {d['server']['p95_ms']} ms, over HTTP p95 {d['http']['p95_ms']} ms, "
                     f"queries {d['queries']}")
    real = results.get("real_data")
    if real:
        lines.append(f"\nreal data: {real.get('skipped') or real.get('note')}")
        if "batch" in real:
            lines.append(f"real data batch ingest: {real['batch']['assertions_per_second']} assertions/s "
                         f"({real['batch']['assertions']:,} assertions, outcomes {real['batch']['outcomes']})")
    w = _get(results, "profile", "write_path")
    if w:
        lines.append(f"\nwebhook write path: {w['queries_per_event']} queries per event, "
                     f"{w['seconds_per_event'] * 1000:.1f} ms per event in process")
    b = _get(results, "profile", "batch_path")
    if b and "skipped" not in b:
        lines.append(f"batch write path: {b['queries_per_event']} queries per event ({b['queries_per_batch']} per "
                     f"batch), {b['seconds_per_event'] * 1000:.2f} ms per event in process")
    lines.append(f"\n== targets ({TARGETS_SIZE_NOTE}) ==")
    for t in results.get("targets", []):
        lines.append(f"{_verdict(t['pass']):4}  {t['target']}: {_fmt(t['value'], 2)} (at {t['at']}) {t.get('note', '')}")
    return "\n".join(lines)


def plot(results: dict, path: Path) -> bool:
    """Latency (p95) and throughput against store size, memoryui and
    baseline, as a PNG at ``path``. Returns ``False`` when there is nothing
    to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = results.get("sizes") or []
    if not sizes:
        return False
    xs = [s.get("stored_before") or s["target_assertions"] for s in sizes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.6))
    for kind, name in READ_NAMES.items():
        line = left.plot(xs, [_get(s, "reads", kind, "memoryui", "p95_ms") for s in sizes], marker="o", label=name)
        left.plot(xs, [_get(s, "reads", kind, "baseline", "p95_ms") for s in sizes], linestyle=":", marker=".",
                  color=line[0].get_color())
    left.plot(xs, [_get(s, "webhook", "latency", "p95_ms") for s in sizes], marker="s", color="black",
              label="signed webhook (concurrent)")
    left.plot(xs, [_get(s, "webhook_single", "latency", "p95_ms") for s in sizes], marker="s", color="grey",
              label="signed webhook (one connection)")
    left.set(xscale="log", yscale="log", xlabel="assertions stored", ylabel="p95 latency, ms",
             title="Latency (solid: memoryui, dotted: plain SELECT)")
    # Legends under the axes: inside, they hid the lines at the largest size.
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    right.plot(xs, [_get(s, "batch", "assertions_per_second") for s in sizes], marker="o", label="memoryui batch")
    right.plot(xs, [_get(s, "webhook", "assertions_per_second") for s in sizes], marker="s", label="memoryui webhooks")
    right.plot(xs, [_get(s, "baseline_insert", "rows_per_second") for s in sizes], linestyle=":", marker="o",
               label="plain INSERT per row")
    right.plot(xs, [_get(s, "baseline_copy", "rows_per_second") for s in sizes], linestyle=":", marker="^",
               label="plain COPY")
    right.set(xscale="log", yscale="log", xlabel="assertions stored", ylabel="assertions per second",
              title="Ingest throughput")
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _md_table(header: list[str], rows: list) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def findings(results: dict) -> list[str]:
    """Hotspots read off the measurements: the costliest statements per
    event, plans with sequential scans, reads whose query count is high."""
    out = []
    b = _get(results, "profile", "batch_path")
    if b and "skipped" not in b:
        out.append(f"- Batch write path (`dispatch_batch`): **{b['queries_per_event']} queries per event** "
                   f"({b['queries_per_batch']} per batch of about {b['events'] // max(1, b['batches'])}), "
                   f"{b['seconds_per_event'] * 1000:.2f} ms per event in process. Costliest statement shapes:")
        for s in b["statements"][:8]:
            per_batch = s["count"] / max(1, b["batches"]) if "count" in s else s["per_event"] * b["events"] / max(1, b["batches"])
            out.append(f"  - {per_batch:.1f}/batch, {s['total_ms']} ms: `{s['statement'][:140]}`")
    w = _get(results, "profile", "write_path")
    if w:
        out.append(f"- Per-event write path (signed webhook, `dispatch_once`): **{w['queries_per_event']} queries per event**, "
                   f"{w['seconds_per_event'] * 1000:.1f} ms per event in process "
                   f"(measured on {w['events']} events at {_fmt(_get(results, 'profile', 'stored'))} stored). "
                   "Costliest statement shapes (per event, total ms over the sample):")
        for s in w["statements"][:12]:
            out.append(f"  - {s['per_event']}/event, {s['total_ms']} ms: `{s['statement'][:140]}`")
    for p in _get(results, "profile", "plans", default=[]) or []:
        if p["seq_scans"] and (p["execution_ms"] or 0) >= 1.0:  # a seq scan of a tiny table is the right plan
            out.append(f"- `{p['name']}` runs a sequential scan on {', '.join(p['seq_scans'])} "
                       f"({p['execution_ms']} ms).")
    for name, r in (_get(results, "profile", "read_queries", default={}) or {}).items():
        out.append(f"- {READ_NAMES.get(name, name)}: {r['queries']} queries per request.")
    slow_plans = [p for p in _get(results, "profile", "plans", default=[]) or [] if (p["execution_ms"] or 0) >= 1.0]
    for p in slow_plans:
        if not p["seq_scans"]:
            out.append(f"- `{p['name']}` takes {p['execution_ms']} ms in the database (see its plan in results.json).")
    return out


def _cpu_sentence(cpu: dict, what: str, per: str, *, celery: str = "") -> str:
    """One ``cpu_per_request`` reading as a sentence: CPU per ``what`` by
    process group, and how busy the machine was."""
    return (f"CPU per {what}: web server {cpu['web_ms']} ms, PostgreSQL {cpu['postgres_ms']} ms, client "
            f"{cpu['client_ms']} ms, Celery worker {cpu['celery_ms']} ms{f' ({celery})' if celery else ''}; "
            f"the machine was busy {_percent(cpu['utilisation'])} of the time ({cpu['machine_ms']} ms of CPU per "
            f"{per} in all).")


def write_report(results: dict, directory: Path) -> Path:
    """``REPORT.md`` and ``bench.png`` in ``directory``; returns the report path."""
    directory.mkdir(parents=True, exist_ok=True)
    has_plot = plot(results, directory / "bench.png")
    cfg = results.get("config", {})
    m = results.get("machine", {})
    lines = ["# memoryui benchmark", "",
             f"Command: `{command_line(cfg)}` "
             f"(whole subjects of at least {cfg.get('slice')} batch + {cfg.get('webhook_slice')} webhook "
             f"assertions per size over "
             f"{cfg.get('clients')} client connections, then {cfg.get('webhook_single_slice', 0)} webhook "
             f"assertions over one, then {cfg.get('webhook_paced_slice', 0)} offered at "
             f"{_percent(cfg.get('webhook_paced_load'))} of the concurrent rate over {cfg.get('clients')} "
             f"connections; {cfg.get('web_workers')} Granian workers, "
             f"{cfg.get('read_samples')} requests per read kind). Started {results.get('started_at')}, "
             f"took {results.get('seconds')} s.", "",
             f"Machine: {m.get('cpus')} CPUs, {m.get('memory_gib')} GiB, PostgreSQL {m.get('postgresql')}, "
             f"Python {m.get('python')}; load average at start {m.get('load_average_at_start')} "
             "(the machine is shared: absolute figures are noisy, ratios less so). "
             f"CPU probe (`sum(range(10**6))`, best of 5) at start {m.get('cpu_probe_ms_at_start')} ms; "
             "each size gives its own below (about 8 ms on a typical core of this kind of machine; "
             "CPU figures scale with it).", "",
             f"Preload: the store is filled by `{cfg.get('preload')}` before each size is measured "
             "(see `bench/preload.py`; `tables` writes the ledger's tables directly, resolving each key with "
             "`facts.resolve` and projecting with `facts.projection`, no domain events). Every measured figure "
             "goes through HTTP to a Granian server on 127.0.0.1, served as the README says.", ""]
    if has_plot:
        lines += ["![latency and throughput against store size](bench.png)", ""]
    lines += ["## Targets", "", f"_{TARGETS_SIZE_NOTE}._", ""]
    lines += _md_table(["target", "value", "at", "verdict"],
                       [(t["target"], _fmt(t["value"], 2), t["at"], _verdict(t["pass"]) + (f" ({t['note']})" if t.get("note") else ""))
                        for t in results.get("targets", [])])
    for size in results.get("sizes", []):
        lines += ["", f"## {size['size']} stored", "",
                  f"CPU probe {size.get('cpu_probe_ms')} ms. "
                  f"{_fmt(size.get('stored_before'))} assertions before the measured slices, "
                  f"{_fmt(size.get('stored_after'))} after. Preload {_fmt(_get(size, 'preload', 'assertions'))} "
                  f"assertions in {_get(size, 'preload', 'seconds')} s ({_get(size, 'preload', 'mode')}), then "
                  f"`VACUUM (ANALYZE)` and `CHECKPOINT` in {_get(size, 'preload', 'settle_seconds')} s before "
                  "measuring. "
                  f"Batch outcomes: {_get(size, 'batch', 'outcomes')}. Webhook outcomes: "
                  f"{_get(size, 'webhook', 'outcomes')}.", ""]
        lines += _md_table(["figure", "memoryui", "baseline", "ratio"], figure_rows(size))
        cpu = _get(size, "batch", "cpu_per_assertion")
        if cpu:
            lines += ["", _cpu_sentence(cpu, "assertion through the batch endpoint", "assertion",
                                        celery="the prompts the slice asks for")]
        for key, how in (("webhook", f"{_get(results, 'config', 'clients')} concurrent clients"),
                         ("webhook_single", "one connection"), ("webhook_paced", "paced")):
            cpu = _get(size, key, "cpu_per_webhook")
            if cpu:
                lines += ["", _cpu_sentence(cpu, f"signed webhook ({how})", "webhook")]
        lines += ["", f"Peak resident memory during build and ingest (MiB): {size.get('rss_peaks')}."]
    dash = results.get("dashboard") or {}
    lines += ["", "## Dashboard memory page", ""]
    if "skipped" in dash or not dash.get("pages"):
        lines.append(f"{dash.get('skipped', 'not measured')}.")
    else:
        lines += [f"`GET /` signed in as a subject with N current memories, on the largest store "
                  f"({_fmt(dash.get('stored'))} assertions). Server time: in process through the whole Django "
                  "stack (no network); HTTP: the same page from Granian.", ""]
        lines += _md_table(["memories", "server p50 ms", "server p95 ms", "HTTP p95 ms", "queries"],
                           [(f"{int(n):,}", d["server"]["p50_ms"], d["server"]["p95_ms"], d["http"]["p95_ms"],
                             f"{d['queries'][0]}-{d['queries'][1]}")
                            for n, d in sorted(dash["pages"].items(), key=lambda x: int(x[0]))])
    real = results.get("real_data")
    if real:
        lines += ["", "## Real data (YAGO11k, DyKnow)", ""]
        if "skipped" in real:
            lines.append(real["skipped"])
        else:
            lines.append(f"{real['note']}: {_fmt(_get(real, 'preload', 'assertions'))} preloaded, "
                         f"{_fmt(_get(real, 'batch', 'assertions'))} through the batch endpoint at "
                         f"{_get(real, 'batch', 'assertions_per_second')} assertions/s "
                         f"(outcomes {_get(real, 'batch', 'outcomes')}).")
    found = findings(results)
    if found:
        lines += ["", "## Hotspots (measured)", ""] + found
    notes = results.get("notes") or []
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    path = directory / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path
