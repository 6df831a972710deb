"""Teams (accounts). Quotas and the usage ledger hang off these."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

team_name_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    "Team names are 1-63 lowercase letters, digits and hyphens, starting and ending with a letter or digit.",
)


class Team(models.Model):
    name = models.CharField(max_length=63, unique=True, validators=[team_name_validator])
    description = models.CharField(max_length=500, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
