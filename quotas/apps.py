from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Teams and quotas"

    def ready(self) -> None:
        from jobs.hooks import job_hooks
        from quotas.services import ledger_charge, quota_check_job, team_volumes_check

        # Limits that can never pass refuse a submit; a job leaving its GPUs is charged up to that instant.
        job_hooks.on_submit(quota_check_job)
        job_hooks.on_submit(team_volumes_check)
        job_hooks.on_left_active(ledger_charge)
        job_hooks.on_resizing(ledger_charge)
