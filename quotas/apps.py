from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Teams and quotas"

    def ready(self) -> None:
        from django.db.models.signals import m2m_changed

        from jobs.hooks import job_hooks
        from quotas.membership import members_changed
        from quotas.models import Team
        from quotas.services import ledger_charge, quota_check_job, team_volumes_check

        # Limits that can never pass refuse a submit; a job leaving its GPUs is charged up to that instant.
        job_hooks.on_submit(quota_check_job)
        job_hooks.on_submit(team_volumes_check)
        job_hooks.on_left_active(ledger_charge)
        job_hooks.on_resizing(ledger_charge)
        # Whoever leaves a team leaves their jobs queued for it cancelled, however the membership changed (quotas.membership).
        m2m_changed.connect(members_changed, sender=Team.members.through, dispatch_uid="quotas.members_changed")
