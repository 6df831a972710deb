from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from jobs.hooks import job_hooks
        from notify.services import notify_job_transition

        # A job that starts, ends or fails tells its owner, as they asked (docs/notifications.md).
        job_hooks.on_state_changed(notify_job_transition)
