"""Importers for the real public data sets (one module per data set).

Each importer turns a data file into ``fact.asserted`` events and sends them
through the same path a real agent backend uses: signed Standard Webhooks to
``POST /webhooks/<slug>/`` or the batch endpoint ``POST
/api/v1/assertions/batch`` (see :mod:`facts.importers.sender`). Nothing is
written to the database behind the API's back.

- :mod:`facts.importers.dyknow`: DyKnow offices, CEOs and sports teams.
- :mod:`facts.importers.yago`: YAGO11k temporal facts.
- :mod:`facts.importers.common`: events, ordering, the run loop, the summary.
"""
