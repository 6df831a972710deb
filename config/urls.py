from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from frontend.account_views import LogoutView, PasswordChangeDoneView, PasswordChangeView
from frontend.errors import favicon
from telemetry.exporter_view import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.jobs.urls")),
    path("api/v1/", include("api.accounts.urls")),
    path("api/v1/", include("api.quotas.urls")),
    path("api/v1/", include("api.telemetry.urls")),
    path("api/v1/", include("api.audit.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: the Content-Security-Policy forbids inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    # Before Django's own, in the site's look (frontend.account_views): a GET of logout asks, a POST logs out.
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("accounts/", include("django.contrib.auth.urls")),
    # Where Prometheus looks by default: no trailing slash.
    path("metrics", metrics_view, name="metrics"),
    path("whatif/", include("whatif.urls")),
    # Browsers ask for it whatever the pages say.
    path("favicon.ico", favicon),
    path("", include("frontend.urls")),
]

# JSON under /api/, the site's pages elsewhere (apikit/errors.py).
handler404 = "apikit.errors.json_not_found"
handler500 = "apikit.errors.json_server_error"
handler403 = "frontend.errors.forbidden"
