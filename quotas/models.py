"""Teams (accounts), quotas on users and teams, and the usage ledger."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from policy.budget import node_hours_words

team_name_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    "Team names are 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit.",
)

k8s_name_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", "A Kubernetes object name: lowercase letters, digits, '-' and '.', at most 253."
)
# A quota's fair-share weight: the model refuses less (and the database 0 or less); the API and the quota page say both
# bounds. Beyond these a weight means nothing but a typo: 1e-300 would starve the account, 1e300 the rest of the cluster.
MIN_FAIR_SHARE_WEIGHT = 0.001
MAX_FAIR_SHARE_WEIGHT = 1_000_000

pull_secrets_validator = RegexValidator(r"^\s*([a-z0-9]([-a-z0-9.]*[a-z0-9])?\s*(,\s*|$))*$", "Names of Secrets, separated by commas.")


class Team(models.Model):
    name = models.CharField(max_length=63, unique=True, validators=[team_name_validator])
    description = models.CharField(max_length=500, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    allow_host_network = models.BooleanField(
        default=False,
        help_text="Pods of this team's jobs share their node's network namespace (hostNetwork), e.g. for RDMA setups that need it. "
        "Every other job's pods are refused it.",
    )
    allow_run_as_root = models.BooleanField(
        default=False,
        help_text="Pods of this team's jobs may run as root (uid 0). Every other job's pods must run as a non-root user.",
    )
    allow_writable_root_filesystem = models.BooleanField(
        default=False,
        help_text="Pods of this team's jobs may write to their container's root filesystem. Every other job's pods get a "
        "read-only root filesystem, with /tmp and /dev/shm writable.",
    )
    image_pull_secrets = models.CharField(
        max_length=1000,
        blank=True,
        validators=[pull_secrets_validator],
        help_text="Secrets in the jobs' namespace that the team's pods pull their images with, comma-separated.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def pull_secrets(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.image_pull_secrets.split(",") if name.strip())


class TeamVolume(models.Model):
    """A PersistentVolumeClaim in the jobs' namespace that the team's jobs may mount, at a path each job names."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="volumes")
    claim = models.CharField(max_length=253, validators=[k8s_name_validator], help_text="The claim's name in the jobs' namespace.")
    read_only = models.BooleanField(default=True, help_text="Mounted read-only whatever the job asks (shared datasets).")
    description = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["team", "claim"]
        constraints = [models.UniqueConstraint(fields=["team", "claim"], name="team_volume_once")]

    def __str__(self) -> str:
        return f"{self.team}: {self.claim}{' (read-only)' if self.read_only else ''}"


class Quota(models.Model):
    """Limits on one user or one team. A user with no row gets the site default (settings).

    Null means unlimited. `max_gpus` is the guaranteed share: GPUs held at once by
    non-preemptible jobs; preemptible jobs may borrow idle GPUs beyond it.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="quota")
    team = models.OneToOneField(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="quota")
    max_gpus = models.PositiveIntegerField(null=True, blank=True)
    max_wall_time_seconds = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    max_node_hours_per_job = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    node_hours_per_period = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    fair_share_weight = models.FloatField(default=1.0, validators=[MinValueValidator(MIN_FAIR_SHARE_WEIGHT)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(team__isnull=True)) | (Q(user__isnull=True) & Q(team__isnull=False)),
                name="quota_on_exactly_one_account",
            ),
            models.CheckConstraint(condition=Q(fair_share_weight__gt=0), name="quota_weight_positive"),
        ]

    def __str__(self) -> str:
        return f"quota of {'team ' + self.team.name if self.team is not None else 'user ' + str(self.user)}"


class UsageCharge(models.Model):
    """The ledger: what one job used in one budget period, charged as it runs.

    node-seconds count a node's share held (GPUs held / GPUs on the node), so a job
    holding a whole node pays one node-hour per hour and a 2-GPU job on an 8-GPU
    node pays a quarter.
    """

    # The ledger outlives the job: deleting a finished job (Django admin) keeps what it was charged,
    # and `job_number` still says which job it was.
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="charges")
    job_number = models.BigIntegerField(help_text="The job's id, kept after the job is deleted.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="charges")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, null=True, blank=True, related_name="charges")
    period_start = models.DateTimeField()
    node_seconds = models.FloatField(default=0)
    gpu_seconds = models.FloatField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "period_start"], name="charge_one_per_job_period")]
        indexes = [models.Index(fields=["period_start", "user"]), models.Index(fields=["period_start", "team"])]

    def __str__(self) -> str:
        return f"job {self.job_number} in period {self.period_start:%Y-%m-%d}: {self.node_seconds / 3600:.2f} node-hours"


class BudgetGrant(models.Model):
    """Node-hours an admin added to one account's budget for one budget period only: that period's budget is the
    quota's `node_hours_per_period` plus its grants, and the next period starts from the quota's again.

    What a Slurm admin does with `sacctmgr modify ... set RawUsage=0` (a reset) or by raising GrpTRESMins and
    remembering to lower it: a deadline's extra node-hours, or a budget given back after a failed run, without
    changing the quota for every period after. Never edited or deleted: each is on the audit trail (`quota.grant`). One
    of the current period made by mistake (500 for 50) is revoked instead (`quota.revoke`): kept, with who revoked it,
    when and why, and no longer counted in any budget.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="budget_grants")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, null=True, blank=True, related_name="budget_grants")
    period_start = models.DateTimeField(help_text="The budget period it adds to (quotas.periods.period_bounds).")
    node_hours = models.FloatField(validators=[MinValueValidator(0)])
    reason = models.CharField(max_length=200)
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    granted_by_username = models.CharField(max_length=150, blank=True)
    granted_at = models.DateTimeField(auto_now_add=True)
    # Set once, by quotas.services.budget_grant_revoke: a revoked grant adds nothing to the budget, and stays listed.
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    revoked_by_username = models.CharField(max_length=150, blank=True)
    revoke_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["granted_at"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(team__isnull=True)) | (Q(user__isnull=True) & Q(team__isnull=False)),
                name="grant_on_exactly_one_account",
            ),
            models.CheckConstraint(condition=Q(node_hours__gt=0), name="grant_positive"),
        ]
        indexes = [models.Index(fields=["period_start"])]

    def __str__(self) -> str:
        whose = f"team {self.team.name}" if self.team is not None else f"user {self.user}"
        revoked = " (revoked)" if self.revoked_at is not None else ""
        return f"{node_hours_words(self.node_hours)} for {whose} in the period from {self.period_start:%Y-%m-%d}{revoked}"
