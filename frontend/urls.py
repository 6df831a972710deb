from django.urls import path

from frontend import views

app_name = "frontend"

urlpatterns = [
    path("", views.job_list, name="job-list"),
    path("jobs/new/", views.job_new, name="job-new"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel_view, name="job-cancel"),
    path("cluster/", views.cluster_view, name="cluster"),
]
