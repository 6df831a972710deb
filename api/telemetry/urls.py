from django.urls import path

from api.telemetry.views import JobMetricsView, JobTelemetryPushView

urlpatterns = [
    path("jobs/<int:pk>/telemetry/", JobTelemetryPushView.as_view(), name="job-telemetry-push"),
    path("jobs/<int:pk>/metrics/", JobMetricsView.as_view(), name="job-metrics"),
]
