"""Issue 13, item 5: labels are never deleted by a side effect.

Deleting a membership in the project's admin inline deleted its labels and revisions (the inline's
delete checks only PROTECT relations, and ``Label.labeler`` / ``Membership.user`` cascaded). Now both
are RESTRICT (refused unless the labels go by another, deliberate cascade: deleting the whole project),
the inline has no delete box and memberships are deactivated instead.
"""

import pytest
from django.db.models import RestrictedError

from labeling.models import Label, LabelRevision, Membership
from tests.labeling.helpers import add_images, label_all, open_calibration_1

pytestmark = pytest.mark.django_db


@pytest.fixture
def labelled(project, labelers):
    add_images(project, 3)
    phase = open_calibration_1(project, size=3, cal1=3)
    label_all(phase, labelers[0], tone=4)
    return labelers[0]


def form_post_data(response) -> dict:
    """The admin change form as the browser would send it back unchanged (main form, inlines, management)."""
    data = {}
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms.append(inline.formset.management_form)
        forms.extend(inline.formset.forms)
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is None or value is False:
                continue
            data[form.add_prefix(name)] = "on" if value is True else value
    return data


def test_the_project_inline_cannot_delete_a_membership_with_labels(client, labelled):
    from tests.factories import UserFactory

    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    url = f"/admin/labeling/project/{labelled.project_id}/change/"
    page = client.get(url)
    assert page.status_code == 200
    data = form_post_data(page)
    index = next(
        i for i, form in enumerate(page.context["inline_admin_formsets"][0].formset.forms) if form.instance == labelled
    )
    data[f"memberships-{index}-DELETE"] = "on"
    n_labels = Label.objects.filter(labeler=labelled).count()
    assert n_labels == 3
    r = client.post(url, data)
    assert r.status_code in (200, 302)
    assert Membership.objects.filter(pk=labelled.pk).exists()
    assert Label.objects.filter(labeler=labelled).count() == n_labels
    assert LabelRevision.objects.filter(label__labeler=labelled).count() == n_labels
    # Taking someone off the project: untick "is active" (their labels stay).
    data.pop(f"memberships-{index}-DELETE")
    data.pop(f"memberships-{index}-is_active")
    assert client.post(url, data).status_code == 302
    labelled.refresh_from_db()
    assert labelled.is_active is False and Label.objects.filter(labeler=labelled).count() == n_labels


def test_deleting_a_membership_or_an_account_with_labels_is_refused(labelled):
    with pytest.raises(RestrictedError):
        Membership.objects.get(pk=labelled.pk).delete()
    with pytest.raises(RestrictedError):
        labelled.user.delete()
    assert Label.objects.filter(labeler=labelled).count() == 3


def test_deleting_a_whole_project_on_purpose_still_takes_its_labels(labelled):
    project = labelled.project
    project.delete()
    assert not Label.objects.exists() and not Membership.objects.filter(pk=labelled.pk).exists()


def test_the_admin_offers_no_membership_delete(client, labelled):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    assert client.get(f"/admin/labeling/membership/{labelled.pk}/delete/").status_code in (302, 403)
    r = client.post(
        "/admin/labeling/membership/", {"action": "deactivate", "_selected_action": [labelled.pk]}, follow=True
    )
    assert r.status_code == 200
    labelled.refresh_from_db()
    assert labelled.is_active is False and Label.objects.filter(labeler=labelled).count() == 3
