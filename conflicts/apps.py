from django.apps import AppConfig


class ConflictsConfig(AppConfig):
    name = "conflicts"
    verbose_name = "Conflicts and prompts"

    def ready(self) -> None:
        from conflicts import subscribers

        subscribers.connect()
