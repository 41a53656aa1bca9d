"""The WSGI entry point (memoryui/wsgi.py)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_start_up_objects_are_frozen_out_of_full_collections():
    """What the server loads at start-up, the URL conf and the API
    included, is frozen: a full garbage collection then scans only what
    requests left, not the whole application (tens of milliseconds). The
    youngest generation waits for 50,000 allocations (memoryui/runtime.py)."""
    probe = ("import gc, memoryui.wsgi, sys; print(gc.get_freeze_count(), gc.get_threshold()[0], "
             "'memoryui.urls' in sys.modules, 'facts.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE":
                         "memoryui.settings"}, capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert int(out[0]) > 50_000 and out[1:] == ["50000", "True", "True"], out


def test_the_celery_worker_settles_its_collector_once_ready(monkeypatch):
    import gc

    from celery.signals import worker_ready

    settled = []
    monkeypatch.setattr("memoryui.runtime.settle_collector", lambda: settled.append(gc.get_threshold()))
    worker_ready.send(sender=None)

    assert len(settled) == 1


def test_start_up_imports_the_broker_transport_without_connecting():
    """The broker transport is imported at start-up, so the first request
    that queues a task does not pay for the imports; nothing connects to
    the broker then (here it is a closed port: start-up still succeeds)."""
    probe = "import sys, memoryui.wsgi; print('kombu.transport.redis' in sys.modules, 'redis' in sys.modules)"
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "memoryui.settings", "REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["True", "True"], out


def test_the_demo_server_does_not_keep_a_connection_per_request_thread(transactional_db):
    """bin/demo serves with ``manage.py runserver``, whose request threads
    never close the database connection they keep: with the demo's
    ``DATABASE_CONN_MAX_AGE=0`` a burst of parallel requests leaves no
    connection behind (with the default 60 every thread kept one until
    PostgreSQL refused new clients)."""
    import threading
    import time
    import urllib.error
    import urllib.request

    from django.conf import settings
    from django.db import connection

    db = settings.DATABASES["default"]
    url = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def server_connections() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND pid <> pg_backend_pid()")
            return cursor.fetchone()[0]

    env = {**os.environ, "DATABASE_URL": url, "DATABASE_CONN_MAX_AGE": "0", "DEBUG": "1"}
    server = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def get() -> int:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/subjects/u-1/facts",
                                             headers={"Authorization": "Bearer mui_unknown"})
            try:
                return urllib.request.urlopen(request, timeout=30).status
            except urllib.error.HTTPError as exc:
                return exc.code

        deadline = time.monotonic() + 60
        while True:
            try:
                assert get() == 401
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "runserver did not start"
                time.sleep(0.3)
        before = server_connections()
        answers: list[int] = []
        threads = [threading.Thread(target=lambda: answers.append(get())) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == [401] * 12
        time.sleep(0.5)
        assert server_connections() <= before
    finally:
        server.terminate()
        server.wait(timeout=30)
