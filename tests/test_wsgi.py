"""The WSGI entry point (memoryui/wsgi.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_start_up_objects_are_frozen_out_of_full_collections():
    """What the server loads at start-up, the URL conf and the API
    included, is frozen: a full garbage collection then scans only what
    requests left, not the whole application (tens of milliseconds)."""
    probe = ("import gc, memoryui.wsgi, sys; "
             "print(gc.get_freeze_count(), 'memoryui.urls' in sys.modules, 'facts.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE":
                         "memoryui.settings"}, capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert int(out[0]) > 50_000 and out[1:] == ["True", "True"], out
