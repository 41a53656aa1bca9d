"""WSGI entry point.

What is loaded at start-up (Django, the URL conf with the API and its
schemas: about 100,000 objects) lives as long as the process, so it is
frozen out of the garbage collector's full collections. Otherwise each of
them scans it all again, every several hundred requests: a pause of 25 to
35 ms on the request that triggers it.

The Celery broker's transport (kombu's Redis transport and the Redis
client) is imported here too, without connecting: otherwise the first
request of each worker that queues a task (a clarification prompt, an
outgoing delivery) pays about 40 ms for the imports.
"""
import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from memoryui.celery import app as celery_app

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 (imports the URL conf and the API now, to be frozen with the rest)
celery_app.pool  # noqa: B018 (imports the broker transport; connects on first use)
gc.collect()
gc.freeze()
