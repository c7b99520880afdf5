"""The demo behind the README's first command builds what it promises (small sizes here)."""

import pytest

from labeling.models import Label, Phase
from labeling.services.demo import DEMO_PASSWORD, demo_finished_study_create, demo_project_create

pytestmark = pytest.mark.django_db


def test_demo_projects(client):
    project = demo_project_create(n_subjects=4)
    assert project.images.count() == 9  # 4 subjects x 2 shots + the astronaut
    assert project.images.filter(is_synthetic=True).count() == 8
    assert project.images.exclude(mask="").count() == 4  # half the subjects come with a skin mask
    cal1 = project.phases.get(kind=Phase.Kind.CALIBRATION_1)
    assert cal1.status == "open"
    assert project.memberships.filter(role="labeler").count() == 4
    # labeler1 has everything to do; the three others are done (simulated).
    assert not Label.objects.filter(phase=cal1, labeler__user__username="labeler1").exists()
    assert cal1.assignments.filter(done_at__isnull=True).exclude(labeler__user__username="labeler1").count() == 0
    assert demo_project_create(n_subjects=4).pk == project.pk  # idempotent

    finished = demo_finished_study_create(lead=project.created_by, n_subjects=5)
    kinds = dict(finished.phases.values_list("kind", "status"))
    assert kinds == {"calibration_1": "closed", "calibration_2": "closed", "main": "closed", "post_calibration": "open"}
    cal2 = finished.phases.get(kind="calibration_2")
    repeats = Label.objects.filter(phase=cal2, is_repeat=True)
    assert repeats.exists()
    for label in repeats:  # a repeat is always a test-retest pair
        assert Label.objects.filter(
            phase__kind="calibration_1", phase__project=finished, image=label.image, labeler=label.labeler
        ).exists()
    assert client.login(username="labeler1", password=DEMO_PASSWORD)
    assert client.get("/").status_code == 200
