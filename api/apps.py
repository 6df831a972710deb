from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "REST API"

    def ready(self) -> None:
        from api import errors, schema  # noqa: F401  (registers the token scheme's description for the OpenAPI schema)

        errors.register()
