"""WSGI entry point.

Once Django, the URL conf with the API and its schemas are loaded, the
garbage collector is settled (``memoryui.runtime.settle_collector``: what
was loaded is frozen out of its collections, and its youngest generation
waits longer).

The Celery broker's transport (kombu's Redis transport and the Redis
client) is imported here too, without connecting: otherwise the first
request of each worker that queues a task (a clarification prompt, an
outgoing delivery) pays about 40 ms for the imports.
"""
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from memoryui.celery import app as celery_app
from memoryui.runtime import settle_collector

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 (imports the URL conf and the API now, to be frozen with the rest)
celery_app.pool  # noqa: B018 (imports the broker transport; connects on first use)
settle_collector()
