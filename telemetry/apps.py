from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"
    verbose_name = "Telemetry"

    def ready(self) -> None:
        from jobs.hooks import job_hooks
        from telemetry.ended import ended_event_recorded
        from telemetry.latency import latency_event_recorded
        from telemetry.services import telemetry_job_left_running
        from telemetry.tokens import telemetry_pod_env

        # A run that ends is stored; every pod of a gang gets the job's push token (from a Secret).
        job_hooks.on_left_running(telemetry_job_left_running)
        job_hooks.on_pod_secret_env(telemetry_pod_env)
        # Each start adds its wait to /metrics' latency totals as it is recorded, and each end 1 to its state's total,
        # so a scrape never reads the starts or every job ended.
        job_hooks.on_event_recorded(latency_event_recorded)
        job_hooks.on_event_recorded(ended_event_recorded)
