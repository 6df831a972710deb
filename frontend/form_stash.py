"""What a signed-out user typed into the submit form, kept in their session across the sign-in.

A session that expires while the form is open turns Submit into a redirect to the sign-in page (or, when the CSRF
cookie went with it, into the stale-form page, frontend/errors.py): the fields are stashed in the (anonymous) session,
which the sign-in keeps, and the form opens filled in with them once, for the user to check and submit again. Nothing
is ever submitted from the stash.
"""

from __future__ import annotations

from django.http import HttpRequest, QueryDict
from django.urls import reverse

# Never kept: the stale token, and what must be typed again.
NOT_CARRIED = {"csrfmiddlewaretoken", "password", "password1", "password2", "old_password", "new_password1", "new_password2"}
SESSION_KEY = "muster_kept_form"


def form_kept_for(path: str) -> bool:
    """Whether a form posted to `path` is kept through a sign-in (the submit form's is)."""
    return path == reverse("frontend:job-new")


def form_stash(request: HttpRequest, data: QueryDict) -> None:
    request.session[SESSION_KEY] = {
        "path": request.path,
        "fields": [[key, value] for key, values in data.lists() if key not in NOT_CARRIED for value in values],
    }


def form_unstash(request: HttpRequest) -> QueryDict | None:
    """The fields kept for this page, once (they are forgotten as they are given back); None if none were."""
    kept = request.session.get(SESSION_KEY)
    if not kept or kept.get("path") != request.path:
        return None
    del request.session[SESSION_KEY]
    data = QueryDict(mutable=True)
    for key, value in kept["fields"]:
        data.appendlist(key, value)
    return data
