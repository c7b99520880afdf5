"""``POST /api/auth/token/``: a token for a username and password."""

from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from ...signin import signin_failed, signin_locked, signin_succeeded
from .. import parsers


class ThrottledObtainAuthToken(ObtainAuthToken):
    """DRF's token endpoint, with the ``login`` rate per address (settings: DEFAULT_THROTTLE_RATES,
    NUM_PROXIES) and the sign-in page's per-username brake on password guessing (``labeling.signin``):
    429 while either holds."""

    parser_classes = parsers.DEFAULT  # ObtainAuthToken names DRF's own JSONParser
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "login"

    def post(self, request, *args, **kwargs):
        username = request.data.get("username", "") if hasattr(request.data, "get") else ""
        username = username if isinstance(username, str) else ""
        if signin_locked(username):
            raise Throttled(detail="Too many wrong passwords for this username; try again later.")
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            signin_failed(username)
            raise ValidationError(serializer.errors)
        signin_succeeded(username)
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})
