"""The Celery app. Broker: Redis from ``REDIS_URL`` (or the embedded one)."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")

app = Celery("memoryui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
