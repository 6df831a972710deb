"""Input and output shapes of the tokens API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from accounts.models import ApiToken
from apikit.serializers import StrictSerializer
from jobs.validators import printable_name

MAX_EXPIRY_DAYS = 366


class PasswordExchangeSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class TokenCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop' or 'CI pipeline'.")
    # Left out, the token never expires, as it always has: a script that made its long-lived token so would get a 401
    # months later were the Tokens page's 90 days the default now. Said in the schema, README and docs/security.md.
    expires_in_days = serializers.IntegerField(
        min_value=1,
        max_value=MAX_EXPIRY_DAYS,
        required=False,
        allow_null=True,
        help_text=f"Days until it expires, 1 to {MAX_EXPIRY_DAYS}. Left out or null, the token NEVER expires (the Tokens page "
        "offers 90 days first, and a password exchange's token expires after MUSTER_TOKEN_EXCHANGE_EXPIRY_DAYS): give a "
        "number unless it must outlive them, and revoke it when it is no longer needed.",
    )

    def validate_name(self, value: str) -> str:
        if not printable_name(value):
            raise serializers.ValidationError("A name is printable text, without control or invisible characters.")
        user = self.context["user"]
        if ApiToken.objects.filter(user=user, name=value, revoked_at__isnull=True).exists():
            raise serializers.ValidationError(f"You already have an active token named {value!r}; choose another name or revoke it.")
        return value

    def validated_expiry(self) -> Any:
        days = self.validated_data.get("expires_in_days")
        return timezone.now() + timedelta(days=days) if days else None


class TokenSerializer(serializers.ModelSerializer):
    state = serializers.ChoiceField(choices=["active", "expired", "revoked"], read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "hint", "created_at", "expires_at", "last_used_at", "revoked_at", "state"]
        read_only_fields = fields


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The secret: shown this once, never again. Send it as 'Authorization: Bearer <token>'.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]
        read_only_fields = fields
