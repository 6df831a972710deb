from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        from jobs.hooks import job_hooks
        from scheduler.tasks import cycle_soon

        # A submit, requeue or cancel runs a cycle soon after it commits, not at beat's next tick.
        job_hooks.on_queue_changed(cycle_soon)
