from django.urls import path
from rest_framework.routers import SimpleRouter

from api.accounts.views import PasswordExchangeView, TokenViewSet

router = SimpleRouter()
router.register("tokens", TokenViewSet, basename="token")

urlpatterns = [
    path("auth/token/", PasswordExchangeView.as_view(), name="auth-token"),
    *router.urls,
]
