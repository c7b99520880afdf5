import pytest

from tests.factories import MembershipFactory, ProjectFactory, UserFactory


@pytest.fixture
def lead(db):
    return UserFactory(username="lead")


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
