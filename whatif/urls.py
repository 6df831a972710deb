from django.urls import path

from whatif import views

app_name = "whatif"

urlpatterns = [
    path("", views.whatif_list, name="list"),
    path("compare/", views.whatif_compare, name="compare"),
    path("<int:pk>/", views.whatif_detail, name="detail"),
    path("<int:pk>/progress/", views.whatif_progress, name="progress"),
    path("<int:pk>/report.html", views.whatif_report, name="report"),
    path("<int:pk>/summary.json", views.whatif_summary, name="summary"),
    path("<int:pk>/cancel/", views.whatif_cancel_view, name="cancel"),
    path("<int:pk>/delete/", views.whatif_delete_view, name="delete"),
]
