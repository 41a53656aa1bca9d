"""The garbage collector of the long-lived processes (the web server's
workers and the Celery worker), set once they have loaded.

- What is loaded at start-up (Django, the URL conf with the API and its
  schemas: about 100,000 objects) lives as long as the process, so it is
  frozen out of the collector's full collections. Otherwise each of them
  scans it all again, every several hundred requests: a pause of 25 to 35
  ms on the request that triggers it.
- The youngest generation is collected after 50,000 net allocations
  instead of 700. A write allocates many short-lived objects and makes few
  reference cycles, so at 700 the collector ran several times per batch
  event, over objects that were about to be freed anyway: about 4% of the
  web process's instructions per batch event (callgrind, the same store
  and events). The older generations keep their ratios (20, 100), so a
  full collection still follows within a few million allocations.
"""
import gc

YOUNG_GENERATION_THRESHOLD = 50_000


def settle_collector() -> None:
    """Collect, freeze what survived, raise the young generation's threshold."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, 20, 100)
