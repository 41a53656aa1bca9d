"""The processes under test: a Granian web server (WSGI) bound to 127.0.0.1
on a free port, a Celery worker, and a sampler of their resident memory.

Every process started here is stopped by its own id (terminate, then kill
after a grace period); nothing is matched by name.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import requests

ROOT = Path(__file__).resolve().parent.parent
# How the product is served (README, "Serving"): Granian's WSGI interface,
# one Python thread per worker process, HTTP/1.1 only.
SERVE_ARGS = ("--interface", "wsgi", "--blocking-threads", "1", "--http", "1", "memoryui.wsgi:application")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Process:
    """A child process and where its output goes."""

    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self, *, grace_seconds: float = 10.0) -> None:
        """SIGTERM, wait up to ``grace_seconds``, then SIGKILL (this
        process's id only; Granian and Celery stop their own children)."""
        if self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=grace_seconds)


def _spawn(name: str, args: list[str], *, log_dir: Path) -> Process:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log.tmp"
    handle = open(log, "wb")
    popen = subprocess.Popen(args, cwd=ROOT, env=os.environ.copy(), stdout=handle, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
    handle.close()
    return Process(name, popen, log)


def start_web(*, workers: int, log_dir: Path, timeout_seconds: float = 60.0) -> tuple[Process, str]:
    """Start Granian as the product is served (``workers`` worker
    processes, one WSGI thread each, HTTP/1.1 with keep-alive) on a free
    port of 127.0.0.1 and wait until it answers. Returns the process and
    its base URL. Raises ``RuntimeError`` (with the log's tail) when it
    does not answer within ``timeout_seconds``."""
    port = free_port()
    proc = _spawn("web", [sys.executable, "-m", "granian", *SERVE_ARGS, "--host", "127.0.0.1",
                          "--port", str(port), "--workers", str(workers), "--log-level", "warning"],
                  log_dir=log_dir)
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            break
        try:
            if requests.get(f"{base_url}/api/v1/openapi.json", timeout=2).status_code == 200:
                return proc, base_url
        except requests.RequestException:
            pass
        time.sleep(0.2)
    proc.stop()
    raise RuntimeError(f"the web server did not start; log tail:\n{_tail(proc.log)}")


def start_worker(*, log_dir: Path) -> Process:
    """Start one Celery worker (solo pool: one process does the work, so its
    resident memory is the worker's)."""
    return _spawn("worker", [sys.executable, "-m", "celery", "-A", "memoryui", "worker", "--pool", "solo",
                             "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
                  log_dir=log_dir)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def process_tree(pid: int | None) -> list[psutil.Process]:
    """The process ``pid`` and all its descendants (none when ``pid`` is
    ``None`` or gone)."""
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


@dataclass
class Peaks:
    """Peak resident set sizes seen in one phase, in bytes."""

    web_total: int = 0  # Granian's main process plus workers
    web_worker_max: int = 0  # the largest single worker
    celery_worker: int = 0
    runner: int = 0  # this process (the in-process preload, the client)

    def as_json(self) -> dict:
        mib = 1024 * 1024
        return {"web_total_mib": round(self.web_total / mib, 1), "web_worker_max_mib": round(self.web_worker_max / mib, 1),
                "celery_worker_mib": round(self.celery_worker / mib, 1), "runner_mib": round(self.runner / mib, 1)}


@dataclass
class RssMonitor:
    """Samples resident memory every ``interval`` seconds in a thread and
    keeps the peaks per named phase (:meth:`phase`)."""

    web_pid: int | None
    worker_pid: int | None
    interval: float = 0.25
    phases: dict[str, Peaks] = field(default_factory=dict)
    _current: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="rss-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)

    def phase(self, name: str | None) -> None:
        """Attribute the following samples to ``name`` (``None``: to no phase)."""
        self._current = name
        if name is not None:
            self.phases.setdefault(name, Peaks())

    @staticmethod
    def _tree(pid: int | None) -> list[int]:
        try:
            return [p.memory_info().rss for p in process_tree(pid)]
        except psutil.Error:
            return []

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(self.interval):
            name = self._current
            if name is None:
                continue
            peaks = self.phases[name]
            web = self._tree(self.web_pid)
            if web:
                peaks.web_total = max(peaks.web_total, sum(web))
                peaks.web_worker_max = max(peaks.web_worker_max, max(web[1:] or web))
            worker = self._tree(self.worker_pid)
            if worker:
                peaks.celery_worker = max(peaks.celery_worker, max(worker))
            try:
                peaks.runner = max(peaks.runner, me.memory_info().rss)
            except psutil.Error:
                pass


# Who spends the CPU of a measured phase. PostgreSQL is every process whose
# name starts with "postgres" (the server is shared with nothing else
# during a run), so its background writers count too.
CPU_GROUPS = ("web", "postgres", "celery", "client")


@dataclass
class CpuReading:
    """User + system CPU seconds so far, per process id, per group of
    :data:`CPU_GROUPS`; and the machine's busy and idle seconds (all cores)."""

    per_pid: dict[str, dict[int, float]]
    machine_busy: float
    machine_idle: float


def read_cpu(*, web_pid: int | None, worker_pid: int | None) -> CpuReading:
    """One :class:`CpuReading` of the web server (Granian and its
    workers), the Celery worker, PostgreSQL and this process."""

    def spent(procs) -> dict[int, float]:
        out = {}
        for p in procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except psutil.Error:
                pass
        return out

    postgres = [p for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("postgres")]
    machine = psutil.cpu_times()
    idle = machine.idle + getattr(machine, "iowait", 0.0)
    groups = {"web": process_tree(web_pid), "postgres": postgres, "celery": process_tree(worker_pid),
              "client": [psutil.Process()]}
    return CpuReading({name: spent(procs) for name, procs in groups.items()}, sum(machine) - idle, idle)


def cpu_per_request(before: CpuReading, after: CpuReading, requests: int, *, digits: int = 2) -> dict:
    """CPU milliseconds per request of each group between two readings (a
    process born in between counts from zero; one that ended is left
    out), rounded to ``digits`` decimals, and the machine's utilisation
    over the same time (0 to 1)."""
    out: dict = {}
    for group in CPU_GROUPS:
        old = before.per_pid[group]
        seconds = sum(t - old.get(pid, 0.0) for pid, t in after.per_pid[group].items())
        out[f"{group}_ms"] = round(seconds / max(1, requests) * 1000, digits)
    busy, idle = after.machine_busy - before.machine_busy, after.machine_idle - before.machine_idle
    out["machine_ms"] = round(busy / max(1, requests) * 1000, digits)
    out["utilisation"] = round(busy / (busy + idle), 3) if busy + idle > 0 else None
    return out
