import pytest

from tests.factories import MembershipFactory, ProjectFactory, UserFactory


@pytest.fixture
def lead(db):
    """A project lead: may create projects (the ``labeling.add_project`` permission), not staff."""
    from django.contrib.auth.models import Permission

    user = UserFactory(username="lead")
    user.user_permissions.add(Permission.objects.get(codename="add_project", content_type__app_label="labeling"))
    return user


@pytest.fixture
def project(db, lead):
    return ProjectFactory(created_by=lead)  # the creator becomes its lead


@pytest.fixture
def labelers(project):
    return [
        MembershipFactory(project=project, user=UserFactory(username=f"labeler{i}"), pseudonym=f"L{i}")
        for i in range(1, 5)
    ]


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty cache (ids can repeat across tests in a rolled-back database)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def client_for(db):
    """``client_for(user)``: an API client signed in with ``user``'s token."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    def make(user) -> APIClient:
        client = APIClient()
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make
