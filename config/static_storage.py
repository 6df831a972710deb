"""Static files as browsers should cache them: fingerprinted names, gzip beside each file, served for a year."""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class FingerprintedStaticStorage(CompressedManifestStaticFilesStorage):
    """`collectstatic` writes each file under a content-hashed name (and its .gz) and a manifest; pages link the hashed
    names, which WhiteNoise serves with `Cache-Control: max-age=315360000, immutable` and compressed.

    Before any `collectstatic` (the test suite, a first `manage.py runserver`) there is no manifest: pages link the
    plain names, which WhiteNoise finds in the apps and serves with a short cache. With a manifest, a file missing
    from it is still an error, as in Django's storage.
    """

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:
            return name
        return super().stored_name(name)
