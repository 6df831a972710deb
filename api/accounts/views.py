"""The tokens resource and the password exchange. Thin: they validate, call a service, serialize."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate, user_logged_in
from django.contrib.sessions.backends.base import VALID_KEY_CHARS, SessionBase
from django.utils import timezone
from django.utils.crypto import get_random_string
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import ApiToken
from accounts.requests import api_user
from accounts.selectors import tokens_visible_to
from accounts.services import token_create, token_revoke
from accounts.throttling import TokenRequestRateThrottle, lockout_response
from api.accounts.serializers import NewTokenSerializer, PasswordExchangeSerializer, TokenCreateSerializer, TokenSerializer
from apikit.serializers import refuse_a_body
from apikit.viewsets import VisibleViewSet


@extend_schema(tags=["tokens"])
class TokenViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin, VisibleViewSet):
    """Your own API tokens: list them (with when each was last used), make one (its secret is shown once), revoke one."""

    serializer_class = TokenSerializer
    filter_backends: list[type] = []
    queryset = ApiToken.objects.none()  # tells the schema the id's type; get_queryset gives the user's own
    visible_to = staticmethod(tokens_visible_to)

    @extend_schema(request=TokenCreateSerializer, responses={201: NewTokenSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        serializer = TokenCreateSerializer(data=request.data, context={"user": request.user})
        serializer.is_valid(raise_exception=True)
        new = token_create(user=api_user(request), name=serializer.validated_data["name"], expires_at=serializer.validated_expiry())
        return Response(NewTokenSerializer({**TokenSerializer(new.token).data, "token": new.secret}).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        responses={204: None, 400: OpenApiResponse(description="A body was sent (it takes none, or `{}`): nothing was revoked")},
        description="Revoke the token: it stops working at once and stays listed as revoked.",
    )
    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        refuse_a_body(request.data)  # as cancel, hold and release do: a field sent is said to be unread, not ignored
        token_revoke(token=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=None,
        responses={
            204: None,
            400: OpenApiResponse(description="Not sent with an API token (a browser signs out from its menu), or a body was sent"),
        },
        description="Revoke the token this request is sent with, as `muster logout` does: a client need not know the "
        "token's id. It stops working at once and stays listed as revoked.",
    )
    @action(detail=False, methods=["delete"], url_path="current")
    def current(self, request: Request) -> Response:
        refuse_a_body(request.data)
        if not isinstance(request.auth, ApiToken):
            raise ValidationError({"detail": "This request was not sent with an API token, so there is none to revoke."})
        token_revoke(token=request.auth)
        return Response(status=status.HTTP_204_NO_CONTENT)


class _Unstored(SessionBase):
    """A session that is never written. django-axes keys its access log by the request's session and makes one when
    there is none (`session.create()`): a token endpoint would set a sessionid cookie that authenticates nothing and
    leave a django_session row per exchange. It gets a key of its own, as axes needs, and nothing else."""

    def exists(self, session_key: str) -> bool:
        return False

    def create(self) -> None:
        self._session_key = get_random_string(32, VALID_KEY_CHARS)

    def save(self, must_create: bool = False) -> None:
        pass

    def delete(self, session_key: str | None = None) -> None:
        pass

    def load(self) -> dict[str, Any]:
        return {}


class PasswordExchangeView(APIView):
    """Exchange a username and password for a new API token (for scripts), named for the day and expiring after
    MUSTER_TOKEN_EXCHANGE_EXPIRY_DAYS. Wrong credentials answer 401; repeated failures lock the account and the
    address out for a while (429 with Retry-After)."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [TokenRequestRateThrottle]

    @extend_schema(tags=["tokens"], request=PasswordExchangeSerializer, responses={200: NewTokenSerializer})
    def post(self, request: Request) -> Response:
        serializer = PasswordExchangeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if settings.SESSION_COOKIE_NAME not in request.COOKIES:
            request._request.session = _Unstored()  # sets no cookie and writes no row (a signed-in browser keeps its own)
        # django-axes counts failures through authenticate() and needs Django's own request.
        user = authenticate(
            request._request, username=serializer.validated_data["username"], password=serializer.validated_data["password"]
        )
        if getattr(request._request, "axes_locked_out", False):
            return lockout_response(request._request, None, None)  # type: ignore[return-value]
        if user is None:
            return Response(
                {"detail": "Wrong username or password."},
                status=status.HTTP_401_UNAUTHORIZED,
                headers={"WWW-Authenticate": 'Bearer realm="api"'},
            )
        # A sign-in like the form's (last_login is noted).
        user_logged_in.send(sender=user.__class__, request=request._request, user=user)
        now = timezone.now()
        days = settings.MUSTER_TOKEN_EXCHANGE_EXPIRY_DAYS
        new = token_create(
            user=user, name=f"password exchange {now:%Y-%m-%d %H:%M:%S}", expires_at=now + timedelta(days=days) if days else None, now=now
        )
        return Response(NewTokenSerializer({**TokenSerializer(new.token).data, "token": new.secret}).data)
