from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and API tokens"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.api import schema  # noqa: F401  (registers the schema's description of token authentication)
