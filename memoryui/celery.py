"""The Celery app. Broker: Redis from ``REDIS_URL`` (or the embedded one)."""
import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")

app = Celery("memoryui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _settle_collector(**_) -> None:
    """Once the worker is ready for tasks: see :mod:`memoryui.runtime`."""
    from memoryui.runtime import settle_collector

    settle_collector()
