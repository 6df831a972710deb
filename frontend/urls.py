from django.urls import path
from django.views.generic import RedirectView

from frontend import audit_views, notify_views, quota_views, settings_views, submit_views, token_views, views

app_name = "frontend"

urlpatterns = [
    path("", views.job_list, name="job-list"),
    # The job list is the home page; /jobs/ (as /jobs/12/ suggests) goes there, with its filters.
    path("jobs/", RedirectView.as_view(pattern_name="frontend:job-list", query_string=True)),
    path("jobs/cancel/", views.job_list_cancel, name="job-list-cancel"),
    path("jobs/new/", submit_views.job_new, name="job-new"),
    path("jobs/new/estimate/", submit_views.job_new_estimate, name="job-new-estimate"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/live/", views.job_live, name="job-live"),
    path("jobs/<int:pk>/cancel/", views.job_cancel_view, name="job-cancel"),
    path("jobs/<int:pk>/hold/", views.job_hold_view, name="job-hold"),
    path("jobs/<int:pk>/release/", views.job_release_view, name="job-release"),
    path("jobs/<int:pk>/requeue/", views.job_requeue_view, name="job-requeue"),
    path("jobs/<int:pk>/update/", views.job_update_view, name="job-update"),
    path("cluster/", views.cluster_view, name="cluster"),
    path("dashboard/", views.dashboard_view, name="dashboard"),
    path("usage/", quota_views.usage_view, name="usage"),
    path("quotas/", quota_views.quotas_view, name="quotas"),
    path("quotas/users/<str:name>/", quota_views.quota_edit, {"kind": "user"}, name="quota-user"),
    path("quotas/users/<str:name>/reset/", quota_views.quota_reset_view, {"kind": "user"}, name="quota-user-reset"),
    path("quotas/teams/<str:name>/", quota_views.quota_edit, {"kind": "team"}, name="quota-team"),
    path("quotas/teams/<str:name>/reset/", quota_views.quota_reset_view, {"kind": "team"}, name="quota-team-reset"),
    path("quotas/users/<str:name>/grant/", quota_views.quota_grant_view, {"kind": "user"}, name="quota-user-grant"),
    path("quotas/teams/<str:name>/grant/", quota_views.quota_grant_view, {"kind": "team"}, name="quota-team-grant"),
    path(
        "quotas/users/<str:name>/grants/<int:grant_id>/revoke/",
        quota_views.quota_grant_revoke_view,
        {"kind": "user"},
        name="quota-user-grant-revoke",
    ),
    path(
        "quotas/teams/<str:name>/grants/<int:grant_id>/revoke/",
        quota_views.quota_grant_revoke_view,
        {"kind": "team"},
        name="quota-team-grant-revoke",
    ),
    path("audit/", audit_views.audit_view, name="audit"),
    path("settings/", settings_views.settings_view, name="settings"),
    path("account/tokens/", token_views.tokens_view, name="tokens"),
    path("account/notifications/", notify_views.notifications_view, name="notifications"),
    path("account/tokens/<int:pk>/revoke/", token_views.token_revoke_view, name="token-revoke"),
]
