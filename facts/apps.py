from django.apps import AppConfig


class FactsConfig(AppConfig):
    name = "facts"
    verbose_name = "Facts ledger"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from facts.bulk import use_compiled_timestamptz_loader

        connection_created.connect(use_compiled_timestamptz_loader, dispatch_uid="facts.compiled_timestamptz")
