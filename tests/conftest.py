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
