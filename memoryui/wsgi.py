"""WSGI entry point.

What is loaded at start-up (Django, the URL conf with the API and its
schemas: about 100,000 objects) lives as long as the process, so it is
frozen out of the garbage collector's full collections. Otherwise each of
them scans it all again, every several hundred requests: a pause of 25 to
35 ms on the request that triggers it.
"""
import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 (imports the URL conf and the API now, to be frozen with the rest)
gc.collect()
gc.freeze()
