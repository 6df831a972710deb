from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from jobs.metrics_view import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("jobs.api.urls")),
    path("api/v1/", include("accounts.api.urls")),
    path("api/v1/", include("quotas.api.urls")),
    path("api/v1/", include("telemetry.api.urls")),
    path("api/v1/", include("audit.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: the Content-Security-Policy forbids inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("accounts/", include("django.contrib.auth.urls")),
    # Where Prometheus looks by default: no trailing slash.
    path("metrics", metrics_view, name="metrics"),
    path("", include("frontend.urls")),
]

# JSON under /api/, the site's pages elsewhere (jobs/api/errors.py).
handler404 = "jobs.api.errors.json_not_found"
handler500 = "jobs.api.errors.json_server_error"
