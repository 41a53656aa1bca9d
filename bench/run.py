"""``python -m bench.run`` (``make bench``): build stores of growing size on
the machine's PostgreSQL and measure memoryui against the raw database.

One run, one database (``memoryui_bench`` unless ``DATABASE_URL`` says
otherwise; created and dropped here):

1. start Granian (as the product is served) on a free port of 127.0.0.1 and
   one Celery worker;
2. for each size (``--sizes 10k,100k,1M``): preload the store up to that
   many assertions (``--preload``, see :mod:`bench.preload`), then measure
   - ingest: a fixed slice through ``POST /api/v1/assertions/batch`` and
     another through signed webhooks, ``--clients`` connections at once;
     baseline: the same rows as one plain ``INSERT`` each (and ``COPY`` for
     the preloaded rows);
   - reads: p50/p95/p99 of facts-now, context, history of a key, as-of a
     past valid time and as-of a past transaction time; baseline: the
     closest plain indexed ``SELECT``;
   - the dashboard's memory page for subjects with 50, 500 and 5,000
     memories (server time, queries);
3. ingest a slice of the real YAGO11k and DyKnow facts;
4. profile the write path and explain the hot queries on the largest store;
5. write ``bench/results/results.json``, ``REPORT.md`` and ``bench.png``,
   and print every figure beside its baseline with PASS/FAIL per target.

Units: seconds, milliseconds (``_ms``), assertions per second.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

from bench import database, report

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# One WSGI thread per worker process, cores + 1 processes (README,
# "Serving"): one more than the cores, so that a core has work while a
# worker waits on PostgreSQL, and no more, because on a small machine the
# database and the Celery worker share the same cores (measured against
# 2 x cores + 1: bench/results/FINDINGS.md).
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
DEFAULT_WEB_WORKERS = CORES + 1
SIZE_SUFFIXES = {"k": 1_000, "m": 1_000_000}


def parse_size(text: str) -> int:
    """``10k`` -> 10000, ``1M`` -> 1000000, ``2500`` -> 2500. Raises
    ``ValueError`` for anything else."""
    raw = text.strip().lower()
    factor = SIZE_SUFFIXES.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in SIZE_SUFFIXES else raw
    value = int(float(number) * factor)
    if value <= 0:
        raise ValueError(f"not a positive size: {text!r}")
    return value


def size_label(n: int) -> str:
    """10000 -> ``10k``, 1000000 -> ``1M``."""
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from bench.preload import MODES

    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10k,100k,1M", help="store sizes in assertions (default 10k,100k,1M)")
    p.add_argument("--preload", choices=MODES, default="tables",
                   help="how the store is filled before each measurement (default tables; see bench/preload.py)")
    p.add_argument("--slice", type=int, default=20000,
                   help="assertions ingested through the batch endpoint per size (default 20000: about 40 "
                        "requests over a few seconds, so that the first and the last weigh little)")
    p.add_argument("--webhook-slice", type=int, default=3000,
                   help="assertions ingested as signed webhooks over --clients connections per size (default 3000: "
                        "several seconds, so that one stall does not make the p95)")
    p.add_argument("--webhook-single-slice", type=int, default=300,
                   help="assertions sent as signed webhooks over one connection per size, for the latency of a "
                        "webhook on its own (default 300; 0 skips)")
    p.add_argument("--webhook-paced-load", type=float, default=0.5,
                   help="then offer webhooks at this fraction of the rate the concurrent clients reached, over as "
                        "many connections, for the latency at a stated load (default 0.5; 0 skips)")
    p.add_argument("--webhook-paced-slice", type=int, default=600,
                   help="assertions sent at the paced rate per size (default 600)")
    p.add_argument("--batch-size", type=int, default=500, help="events per batch request (1-1000, default 500)")
    p.add_argument("--clients", type=int, default=4, help="concurrent client connections (default 4)")
    p.add_argument("--web-workers", type=int, default=DEFAULT_WEB_WORKERS,
                   help=f"Granian worker processes, one WSGI thread each (default cores + 1, as the README's "
                        f"\"Serving\" says: {DEFAULT_WEB_WORKERS} here)")
    p.add_argument("--read-samples", type=int, default=200, help="requests per read kind per size (default 200)")
    p.add_argument("--dashboard-memories", type=int, default=5000, help="memories of the dashboard's heavy user")
    p.add_argument("--real-slice", type=int, default=2000,
                   help="real (YAGO11k, DyKnow) assertions ingested through the batch endpoint; 0 skips real data")
    p.add_argument("--data-dir", type=Path, default=Path("..") / "shared" / "data",
                   help="the shared data folder (default ../shared/data, relative to the project root)")
    p.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    p.add_argument("--no-profile", action="store_true", help="skip the write-path profile and EXPLAIN plans")
    p.add_argument("--keep-db", action="store_true", help="leave the bench database in place afterwards")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where results go (default bench/results)")
    p.add_argument("--deadline-minutes", type=float, default=120.0,
                   help="stop any ingest phase that runs past this many minutes (default 120)")
    args = p.parse_args(argv)
    args.size_list = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
    if not 1 <= args.batch_size <= 1000:
        p.error("--batch-size must be between 1 and 1000")
    return args


def log(message: str) -> None:
    """One progress line on stderr, with the wall-clock time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Bench:
    """One run: the processes, the tenants and what has been loaded."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.env = database.configure_environment()
        self.url = self.env["DATABASE_URL"]
        self.next_subject = 0
        self.known_at_index = 0  # subjects below this index were recorded before the past transaction time
        self.results: dict = {"sizes": [], "notes": []}
        self.web = self.worker = self.monitor = None
        self.base_url = ""

    # ------------------------------------------------------------------ setup

    def setup(self) -> None:
        """Fresh database, tenants, predicate policies, plain table, server."""
        from bench import baseline, server
        from bench.generate import DASHBOARD_TENANT, PREDICATES, REAL_TENANT, TENANT

        log(f"creating database {database.database_name(self.url)}")
        database.recreate(self.url)
        database.setup_django()
        from facts.models import Tenant
        from facts.tenants import create_or_rotate_tenant

        from bench.preload import register_predicates

        self.creds = {slug: create_or_rotate_tenant(slug=slug) for slug in (TENANT, DASHBOARD_TENANT, REAL_TENANT)}
        self.tenants = {slug: Tenant.objects.get(slug=slug) for slug in self.creds}
        for slug in (TENANT, DASHBOARD_TENANT):
            register_predicates(tenant=self.tenants[slug], predicates=PREDICATES)
        baseline.create(self.url)
        # Import every view now: the runner's in-process code is then the
        # code the server loaded, even if the working tree changes mid-run.
        from django.urls import get_resolver

        get_resolver().url_patterns
        self._flush_broker()
        log_dir = self.args.results_dir
        self.web, self.base_url = server.start_web(workers=self.args.web_workers, log_dir=log_dir)
        self.worker = server.start_worker(log_dir=log_dir)
        self.monitor = server.RssMonitor(self.web.pid, self.worker.pid)
        self.monitor.start()
        log(f"server on {self.base_url} ({self.args.web_workers} workers), celery worker pid {self.worker.pid}")

    def _flush_broker(self) -> None:
        """Empty the bench's own Redis database (only the default one, never
        a database named by the caller): stale tasks from an earlier run
        would refer to rows that no longer exist."""
        import os

        if os.environ.get("REDIS_URL") != database.DEFAULT_REDIS_URL:
            return
        import redis

        try:
            redis.Redis.from_url(database.DEFAULT_REDIS_URL).flushdb()
        except redis.RedisError as exc:
            self.results["notes"].append(f"could not empty the bench Redis database: {exc}")

    def teardown(self) -> None:
        from django.db import connections

        if self.monitor:
            self.monitor.stop()
        for proc in (self.web, self.worker):
            if proc:
                proc.stop()
        connections.close_all()
        if not self.args.keep_db:
            database.drop(self.url)

    # ------------------------------------------------------------------ loading

    def preload(self, *, tenant_slug: str, histories, analyze: bool = True) -> dict:
        """Fill ``tenant_slug`` with ``histories`` by ``--preload``; returns
        ``{"mode", "assertions", "events", "seconds", "assertions_per_second"}``."""
        from bench import client, preload

        started = time.perf_counter()
        mode = self.args.preload
        if mode == "tables":
            done = preload.load_tables(tenant=self.tenants[tenant_slug], histories=histories)
        elif mode == "ledger":
            done = preload.load_ledger(tenant=self.tenants[tenant_slug], histories=histories)
        else:
            r = client.post_batches(base_url=self.base_url, api_key=self.creds[tenant_slug].api_key,
                                    units=client.batch_units(histories, batch_size=self.args.batch_size),
                                    clients=self.args.clients, deadline_seconds=self.args.deadline_minutes * 60)
            done = {"events": r.events, "refused": sum(n for k, n in r.outcomes.items() if k.startswith("refused"))}
        seconds = time.perf_counter() - started
        if analyze:
            self.analyze()
        assertions = sum(h.assertions for h in histories)
        return {"mode": mode, "assertions": assertions, "events": sum(len(h.events) for h in histories),
                "seconds": round(seconds, 2), "assertions_per_second": round(assertions / seconds, 1) if seconds else None,
                **{k: v for k, v in done.items() if k == "refused"}}

    def analyze(self) -> None:
        """``ANALYZE`` the bench database after a preload, as autovacuum
        would soon do: plans are then chosen on the store as it is, not on
        the statistics of an empty one."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    def settle(self) -> float:
        """After a preload, before measuring: ``VACUUM (ANALYZE)`` the bench
        database and ``CHECKPOINT``, as pgbench vacuums before its runs.
        Otherwise autovacuum's pass over the freshly loaded tables (memoryui's
        and the plain baseline's alike) and the checkpointer's flush of the
        preload run during the measurements and land on whichever comes
        first. Returns the seconds it took."""
        from django.db import connection

        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE)")
            cursor.execute("CHECKPOINT")
        seconds = round(time.perf_counter() - started, 2)
        log(f"vacuumed, analysed and checkpointed in {seconds} s")
        return seconds

    def take(self, assertions: int) -> list:
        """The next synthetic subjects, at least ``assertions`` assertions."""
        from bench.generate import histories

        out = list(histories(seed=self.args.seed, start=self.next_subject, assertions=assertions))
        self.next_subject += len(out)
        return out

    # ------------------------------------------------------------------ one size

    def run_size(self, size: int) -> dict:
        label = size_label(size)
        out: dict = {"size": label, "target_assertions": size}
        self.monitor.phase(f"build+ingest {label}")
        have = database.stored_assertions(self.url)
        need = max(0, size - have)
        log(f"{label}: store holds {have:,}; preloading {need:,} assertions ({self.args.preload})")
        out["preload"], out["baseline_copy"] = self.fill(need)
        out["stored_before"] = database.stored_assertions(self.url)
        out["cpu_probe_ms"] = report.cpu_probe_ms()
        log(f"{label}: preload {out['preload']['assertions']:,} in {out['preload']['seconds']} s; "
            f"COPY baseline {out['baseline_copy']['rows_per_second']} rows/s")
        out["batch"], out["baseline_insert"] = self.measure_batch(label)
        out["webhook"], out["baseline_insert_commit"] = self.measure_webhooks(label)
        if self.args.webhook_single_slice > 0:
            out["webhook_single"], out["baseline_insert_commit_single"] = self.measure_webhooks(
                label, assertions=self.args.webhook_single_slice, clients=1)
        if self.args.webhook_paced_load > 0:
            rate = out["webhook"]["events_per_second"] * self.args.webhook_paced_load
            out["webhook_paced"], _ = self.measure_webhooks(label, assertions=self.args.webhook_paced_slice,
                                                            rate=rate)
            out["webhook_paced"]["offered_per_second"] = round(rate, 1)
            out["webhook_paced"]["offered_load"] = self.args.webhook_paced_load
        self.monitor.phase(None)
        out["stored_after"] = database.stored_assertions(self.url)
        out["reads"] = self.measure_reads(label)
        out["rss_peaks"] = self.monitor.phases[f"build+ingest {label}"].as_json()
        return out

    def fill(self, need: int, *, chunk: int = 20_000) -> tuple[dict, dict]:
        """Preload ``need`` synthetic assertions in chunks (generated,
        loaded, then ``COPY``-ed into the plain table and dropped, so memory
        stays flat), at least two chunks: the past transaction time for
        as-of reads falls between the halves. Returns the preload and the
        COPY baseline summaries."""
        from bench import baseline
        from bench.generate import TENANT

        chunk = max(1, min(chunk, (need + 1) // 2))
        done = {"mode": self.args.preload, "assertions": 0, "events": 0, "seconds": 0.0}
        copied = {"rows": 0, "seconds": 0.0}
        split = False
        while done["assertions"] < need:
            hs = self.take(min(chunk, need - done["assertions"]))
            part = self.preload(tenant_slug=TENANT, histories=hs, analyze=False)
            for k in ("assertions", "events", "seconds"):
                done[k] += part[k]
            plain = baseline.rows((e for h in hs for e in h.events), tenant=TENANT)
            copied["seconds"] += baseline.copy(self.url, plain)
            copied["rows"] += len(plain)
            if not split and done["assertions"] >= need / 2:
                self.known_at_index, split = self.next_subject, True
        done["settle_seconds"] = self.settle()
        done["seconds"] = round(done["seconds"], 2)
        done["assertions_per_second"] = round(done["assertions"] / done["seconds"], 1) if done["seconds"] else None
        copied["seconds"] = round(copied["seconds"], 3)
        copied["rows_per_second"] = round(copied["rows"] / copied["seconds"], 1) if copied["seconds"] else None
        return done, copied

    def cpu_reading(self):
        """CPU spent so far by the web server, the Celery worker, PostgreSQL
        and this process (:func:`bench.server.read_cpu`)."""
        from bench import server

        return server.read_cpu(web_pid=self.web.pid, worker_pid=self.worker.pid)

    def quiet(self, *, most_seconds: float = 30.0) -> float:
        """Wait until the Celery worker has been idle for two quarter
        seconds in a row (under 10 ms of CPU in each: its queue is empty,
        since an idle worker takes the next task at once), at most
        ``most_seconds``; returns the seconds waited. Run before each
        slice and each baseline, so that neither measures beside the
        prompts an earlier slice asked for (the slice that asks for them
        pays for them in its own CPU figures while they run)."""
        started = time.perf_counter()
        idle_windows = 0
        while idle_windows < 2 and time.perf_counter() - started < most_seconds:
            before = sum(self.cpu_reading().per_pid["celery"].values())
            time.sleep(0.25)
            idle_windows = idle_windows + 1 if sum(self.cpu_reading().per_pid["celery"].values()) - before < 0.01 else 0
        return round(time.perf_counter() - started, 2)

    def measure_batch(self, label: str) -> tuple[dict, dict]:
        """The batch slice through the endpoint, then the same rows as one
        plain INSERT each (same number of connections). The CPU each
        process group spent per assertion is kept beside the rate (the
        Celery worker opens the prompts the slice asks for meanwhile)."""
        from bench import baseline, client, server
        from bench.generate import TENANT

        hs = self.take(self.args.slice)
        units = client.batch_units(hs, batch_size=self.args.batch_size)
        log(f"{label}: batch slice {sum(h.assertions for h in hs):,} assertions in {len(units)} requests, "
            f"{self.args.clients} clients")
        self.quiet()
        before = self.cpu_reading()
        r = client.post_batches(base_url=self.base_url, api_key=self.creds[TENANT].api_key, units=units,
                                clients=self.args.clients, deadline_seconds=self.args.deadline_minutes * 60)
        batch = self._ingest_json(r)
        batch["cpu_per_assertion"] = cpu = server.cpu_per_request(before, self.cpu_reading(), r.assertions, digits=3)
        log(f"{label}: CPU per batch assertion: web {cpu['web_ms']} ms, PostgreSQL {cpu['postgres_ms']} ms, "
            f"Celery {cpu['celery_ms']} ms; machine busy {cpu['utilisation']:.0%}")
        batch["worker_busy_after_seconds"] = self.quiet()
        chunks = baseline.insert_chunks(hs, tenant=TENANT, size=self.args.batch_size)
        seconds, _ = baseline.insert(self.url, chunks, clients=self.args.clients)
        rows = sum(len(c) for c in chunks)
        plain = {"rows": rows, "seconds": round(seconds, 3), "rows_per_second": round(rows / seconds, 1)}
        log(f"{label}: batch {batch['assertions_per_second']} assertions/s; plain INSERT {plain['rows_per_second']} rows/s")
        return batch, plain

    def measure_webhooks(self, label: str, *, assertions: int | None = None, clients: int | None = None,
                         rate: float | None = None) -> tuple[dict, dict]:
        """A webhook slice (``--webhook-slice`` assertions over ``--clients``
        connections unless given), one signed POST per event (as fast as
        answered, or ``rate`` per second offered), then the
        same rows as one autocommitted INSERT each over as many
        connections (latency per row). The CPU each process group spent
        per webhook is kept beside the latencies."""
        from bench import baseline, client, server
        from bench.generate import TENANT
        from bench.stats import latency_summary

        clients = clients or self.args.clients
        hs = self.take(assertions or self.args.webhook_slice)
        log(f"{label}: webhook slice {sum(len(h.events) for h in hs):,} events, {clients} client(s)"
            + (f", {rate:.0f} per second offered" if rate else ""))
        self.quiet()
        before = self.cpu_reading()
        r = client.post_webhooks(base_url=self.base_url, slug=TENANT, secret=self.creds[TENANT].webhook_secret,
                                 histories=hs, clients=clients, rate=rate,
                                 deadline_seconds=self.args.deadline_minutes * 60)
        hook = self._ingest_json(r)
        hook["cpu_per_webhook"] = server.cpu_per_request(before, self.cpu_reading(), r.requests)
        hook["worker_busy_after_seconds"] = self.quiet()
        chunks = baseline.insert_chunks(hs, tenant=TENANT, size=50)
        seconds, times = baseline.insert(self.url, chunks, clients=clients, latencies=True)
        rows = sum(len(c) for c in chunks)
        plain = {"rows": rows, "seconds": round(seconds, 3), "rows_per_second": round(rows / seconds, 1),
                 "latency": latency_summary(times)}
        cpu = hook["cpu_per_webhook"]
        log(f"{label}: CPU per webhook: web {cpu['web_ms']} ms, PostgreSQL {cpu['postgres_ms']} ms, client "
            f"{cpu['client_ms']} ms, Celery {cpu['celery_ms']} ms; machine busy {cpu['utilisation']:.0%}")
        log(f"{label}: webhook p95 {hook['latency']['p95_ms']} ms ({clients} client(s)); "
            f"plain INSERT+COMMIT p95 {plain['latency']['p95_ms']} ms")
        return hook, plain

    @staticmethod
    def _ingest_json(r) -> dict:
        from bench.stats import latency_summary

        return {"assertions": r.assertions, "events": r.events, "requests": r.requests, "seconds": round(r.seconds, 3),
                "assertions_per_second": round(r.assertions_per_second, 1),
                "events_per_second": round(r.events_per_second, 1), "latency": latency_summary(r.latencies),
                "outcomes": dict(sorted(r.outcomes.items())), "refusals": r.refusals}

    # ------------------------------------------------------------------ reads

    def read_plan(self) -> list[tuple[str, tuple[str, str, str]]]:
        """``--read-samples`` (subject, key with a chain of versions) pairs,
        seeded, from the subjects loaded before the past transaction time."""
        from bench.generate import subject_history

        rng = random.Random(self.args.seed + len(self.results["sizes"]))
        pool = range(0, max(1, self.known_at_index))
        plan = []
        cache: dict[int, object] = {}
        while len(plan) < self.args.read_samples + 5:
            index = rng.choice(pool)
            h = cache.get(index) or subject_history(seed=self.args.seed, index=index)
            cache[index] = h
            if h.chain_keys:
                plan.append((h.subject, rng.choice(h.chain_keys)))
        return plan

    def known_at(self):
        """A past transaction time: when the first half of the latest
        preload was done (the recorded_at of its last subject)."""
        from facts.models import Assertion, Subject

        subject = f"u{max(0, self.known_at_index - 1):07d}"
        latest = (Assertion.objects.filter(subject__in=Subject.objects.filter(external_id=subject))
                  .order_by("-recorded_at").values_list("recorded_at", flat=True).first())
        return latest + timedelta(microseconds=1)

    def measure_reads(self, label: str) -> dict:
        """Every read kind over HTTP, then its baseline SELECT, same subjects."""
        from bench import baseline, client
        from bench.generate import PAST_VALID_AT, TENANT
        from bench.profiling import read_paths
        from bench.stats import latency_summary, ratio

        plan = self.read_plan()
        known_at = self.known_at()
        headers = {"Authorization": f"Bearer {self.creds[TENANT].api_key}"}
        kinds = ("facts_now", "context", "history", "as_of_valid", "as_of_known")
        out = {}
        params: dict[str, list[tuple]] = {k: [] for k in kinds}
        for subject, (entity, predicate, scope) in plan:
            params["facts_now"].append((TENANT, subject))
            params["context"].append((TENANT, subject))
            params["history"].append((TENANT, subject, entity, predicate, scope))
            params["as_of_valid"].append((TENANT, subject, PAST_VALID_AT, PAST_VALID_AT))
            params["as_of_known"].append((TENANT, subject, known_at, known_at))
        plain = baseline.lookups(self.url, params)
        for kind in kinds:
            paths = [read_paths(subject=s, history_key=k, valid_at=PAST_VALID_AT, known_at=known_at)[kind]
                     for s, k in plan]
            mine = latency_summary(client.timed_gets(base_url=self.base_url, headers=headers, paths=paths))
            base = latency_summary(plain[kind])
            out[kind] = {"memoryui": mine, "baseline": base, "ratio_p50": ratio(mine["p50_ms"], base["p50_ms"]),
                         "ratio_p95": ratio(mine["p95_ms"], base["p95_ms"])}
            log(f"{label}: {kind} p50 {mine['p50_ms']} / p95 {mine['p95_ms']} ms; plain SELECT p95 "
                f"{base['p95_ms']} ms (x{out[kind]['ratio_p95']})")
        # The floor under every read: the same client, server and Django
        # answering a path no view serves (404), with no database work.
        floor = latency_summary(client.timed_gets(base_url=self.base_url, headers=headers, expect=404,
                                                  paths=[f"/api/v1/no-such-path/{n}" for n in range(len(plan))]))
        out["http_floor"] = {"memoryui": floor}
        log(f"{label}: HTTP floor (404, no database) p50 {floor['p50_ms']} / p95 {floor['p95_ms']} ms")
        out["known_at"] = known_at.isoformat()
        out["valid_at"] = PAST_VALID_AT.isoformat()
        return out

    # ------------------------------------------------------------------ dashboard

    def dashboard_sizes(self) -> list[int]:
        top = self.args.dashboard_memories
        return sorted({max(1, top // 100), max(1, top // 10), top})

    def load_dashboard_users(self) -> None:
        from bench import dashboard
        from bench.generate import DASHBOARD_TENANT, dashboard_history

        self.dashboard_skip = dashboard.unavailable_reason()
        if self.dashboard_skip:
            log(self.dashboard_skip)
            return
        hs = [dashboard_history(memories=n, subject=f"d{n:06d}") for n in self.dashboard_sizes()]
        r = self.preload(tenant_slug=DASHBOARD_TENANT, histories=hs)
        log(f"dashboard users loaded: {r['assertions']:,} assertions in {r['seconds']} s")

    def measure_dashboard(self, label: str) -> dict:
        from bench import dashboard
        from bench.generate import DASHBOARD_TENANT

        reason = getattr(self, "dashboard_skip", None) or dashboard.unavailable_reason()
        if reason:
            return {"skipped": reason}
        out = {"stored": database.stored_assertions(self.url), "pages": {}}
        for n in self.dashboard_sizes():
            c = dashboard.sign_in(base_url=self.base_url, api_key=self.creds[DASHBOARD_TENANT].api_key,
                                  subject=f"d{n:06d}")
            page = out["pages"][str(n)] = dashboard.measure_page(client=c, base_url=self.base_url,
                                                                 samples=20 if n < 1000 else 40)
            log(f"{label}: dashboard {n} memories: server p95 {page['server']['p95_ms']} ms, {page['queries']} queries")
        return out

    # ------------------------------------------------------------------ real data

    def measure_real(self) -> dict:
        """Preload the real data sets but a slice, then send the slice
        through the batch endpoint."""
        from bench import client
        from bench.generate import REAL_TENANT, SubjectHistory, real_events
        from bench.preload import register_predicates

        events, rules, note = real_events(data_dir=self.args.data_dir)
        if not events:
            log(note)
            return {"skipped": note}
        register_predicates(tenant=self.tenants[REAL_TENANT], predicates=rules)
        by_subject: dict[str, list] = {}
        for e in events:
            by_subject.setdefault(e.subject, []).append(e)
        hs = [SubjectHistory(s, evs) for s, evs in by_subject.items()]
        random.Random(self.args.seed).shuffle(hs)
        measured, total = [], 0
        while hs and total < self.args.real_slice:
            measured.append(hs.pop())
            total += measured[-1].assertions
        pre = self.preload(tenant_slug=REAL_TENANT, histories=hs)
        log(f"real data: {note}; preloaded {pre['assertions']:,}, measuring {total:,} through the batch endpoint")
        r = client.post_batches(base_url=self.base_url, api_key=self.creds[REAL_TENANT].api_key,
                                units=client.batch_units(measured, batch_size=self.args.batch_size),
                                clients=self.args.clients, deadline_seconds=self.args.deadline_minutes * 60)
        out = {"note": note, "preload": pre, "batch": self._ingest_json(r),
               "stored_after": database.stored_assertions(self.url)}
        log(f"real data: batch {out['batch']['assertions_per_second']} assertions/s")
        return out

    # ------------------------------------------------------------------ profile

    def profile(self) -> dict:
        from bench import profiling
        from bench.generate import PAST_VALID_AT, TENANT

        tenant = self.tenants[TENANT]
        hs = self.take(600)
        log(f"profiling the webhook write path on {sum(len(h.events) for h in hs)} events")
        write = profiling.write_path(tenant=tenant, histories=hs)
        batch_hs = self.take(2000)
        log(f"profiling the batch write path on {sum(len(h.events) for h in batch_hs)} events")
        batch = profiling.batch_path(tenant=tenant, histories=batch_hs, batch_size=self.args.batch_size)
        subject, key = self.read_plan()[0]
        known_at = self.known_at()
        with profiling.sent_statements() as sent:
            reads = profiling.read_queries(api_key=self.creds[TENANT].api_key, subject=subject, history_key=key,
                                           valid_at=PAST_VALID_AT, known_at=known_at)
        # The plans PostgreSQL runs for the statements the webhook write
        # path, then the reads, sent (prepared ones on their generic plan).
        plans = [*write.pop("plans"), *profiling.sent_plans(sent)]
        sample = self.read_plan()[:60]
        read_profile = profiling.read_profile(api_key=self.creds[TENANT].api_key, paths=[
            profiling.read_paths(subject=s, history_key=k, valid_at=PAST_VALID_AT, known_at=known_at)["facts_now"]
            for s, k in sample])
        return {"write_path": write, "batch_path": batch, "read_queries": reads, "plans": plans, "facts_now_profile": read_profile,
                "stored": database.stored_assertions(self.url)}

    # ------------------------------------------------------------------ all

    def _dashboard(self) -> dict:
        self.load_dashboard_users()
        return self.measure_dashboard(size_label(self.args.size_list[-1]))

    def step(self, name: str, func) -> None:
        """``results[name] = func()``; an exception becomes a note (with its
        type and message) so the figures measured so far are still written."""
        try:
            self.results[name] = func()
        except Exception as exc:  # noqa: BLE001 - reported, never swallowed silently
            message = f"{name} failed: {type(exc).__name__}: {exc}"
            log(message)
            self.results["notes"].append(message)
        self.save()

    def save(self) -> None:
        """Write the results so far (``results.json.tmp``): a run that dies
        late keeps what it measured."""
        path = self.args.results_dir / "results.json.tmp"
        path.write_text(json.dumps(self.results, indent=1, default=str) + "\n")

    def run(self) -> dict:
        started = time.time()
        self.results["config"] = {k: (_relative(v) if isinstance(v, Path) else v) for k, v in vars(self.args).items()}
        self.results["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
        self.results["machine"] = report.machine()
        self.setup()
        try:
            sizes = self.args.size_list
            for size in sizes:
                self.results["sizes"].append(self.run_size(size))
                self.save()
            # On the largest store: the dashboard's heavy users, then real
            # data, then the profile. A failure in one is noted, not fatal.
            self.step("dashboard", self._dashboard)
            if self.args.real_slice > 0:
                self.step("real_data", self.measure_real)
            if not self.args.no_profile:
                self.step("profile", self.profile)
            self.results["stored_at_end"] = database.stored_assertions(self.url)
        finally:
            self.teardown()
        self.results["seconds"] = round(time.time() - started, 1)
        return self.results


def _relative(path: Path) -> str:
    """``path`` relative to the project root when it is inside it (results
    carry no machine paths)."""
    root = Path(__file__).resolve().parent.parent
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    results = Bench(args).run()
    results["targets"] = report.targets(results)
    path = args.results_dir / "results.json"
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    report.write_report(results, args.results_dir)
    (args.results_dir / "results.json.tmp").unlink(missing_ok=True)
    for server_log in args.results_dir.glob("*.log.tmp"):  # kept only when a run fails, for its tail
        server_log.unlink()
    print(report.console_table(results))
    log(f"results in {_relative(path)} and {_relative(args.results_dir / 'REPORT.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
