"""Existing plain-text tokens (rest_framework.authtoken, no longer installed) become hashed named tokens.

Read with raw SQL, so this needs no authtoken app; a database that never had its table has nothing to move.
Scripts holding those keys keep working; the old table is emptied so no plain-text secret stays behind.
"""

import hashlib

from django.db import migrations
from django.utils import timezone


def move_legacy_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id, created FROM authtoken_token")
        rows = cursor.fetchall()
        for key, user_id, created in rows:
            ApiToken.objects.create(
                user_id=user_id,
                name="token from before named tokens",
                digest=hashlib.sha256(key.encode()).hexdigest(),
                hint=key[:6],
                created_at=created or timezone.now(),
            )
        cursor.execute("DELETE FROM authtoken_token")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_api_tokens")]

    operations = [migrations.RunPython(move_legacy_tokens, migrations.RunPython.noop)]
