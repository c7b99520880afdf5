"""Issue 14, missing basics: a phase's progress over time, labels per day and per labeler, on the phase page
(an inline SVG chart served with the page) and in the phase API (``/api/phases/{id}/progress-over-time/``)."""

from datetime import UTC, datetime

import pytest

from labeling import plots
from labeling.models import Label
from tests.labeling.helpers import add_images, open_calibration_1, submit

pytestmark = pytest.mark.django_db


def on_day(labels, day: str) -> None:
    Label.objects.filter(pk__in=[label.pk for label in labels]).update(
        created_at=datetime.fromisoformat(f"{day}T10:00:00").replace(tzinfo=UTC)
    )


@pytest.fixture
def phase_with_history(project, labelers):
    """L1: 2 labels on Nov 28, 1 on Nov 30; L2: 1 label on Nov 30; nothing on Nov 29."""
    add_images(project, 4)
    phase = open_calibration_1(project, size=4, cal1=4, labels_per_image=4)
    l1, l2 = labelers[0], labelers[1]
    a1 = list(phase.assignments.filter(labeler=l1).order_by("position"))
    a2 = list(phase.assignments.filter(labeler=l2).order_by("position"))
    assert len(a1) >= 3 and a2
    first = [submit(phase, l1, a.image_id, tones=[4]).label for a in a1[:2]]
    later = [submit(phase, l1, a1[2].image_id, tones=[5]).label, submit(phase, l2, a2[0].image_id, tones=[6]).label]
    on_day(first, "2026-11-28")
    on_day(later, "2026-11-30")
    return phase


def test_the_api_gives_labels_per_day_and_per_labeler(phase_with_history, lead, client_for, labelers):
    r = client_for(lead).get(f"/api/phases/{phase_with_history.pk}/progress-over-time/")
    assert r.status_code == 200
    data = r.json()
    assert data["days"] == ["2026-11-28", "2026-11-29", "2026-11-30"]
    assert data["labelers"] == [
        {"pseudonym": "L1", "per_day": [2, 0, 1], "total": 3},
        {"pseudonym": "L2", "per_day": [0, 0, 1], "total": 1},
    ]
    assert data["per_day"] == [2, 0, 2] and data["total"] == 4
    assert (data["first_day"], data["last_day"], data["truncated"]) == ("2026-11-28", "2026-11-30", False)
    # Leads only: a labeler does not see the team's pace.
    assert (
        client_for(labelers[0].user).get(f"/api/phases/{phase_with_history.pk}/progress-over-time/").status_code == 403
    )


def test_a_new_label_shows_at_once(phase_with_history, lead, client_for, labelers):
    api = client_for(lead)
    url = f"/api/phases/{phase_with_history.pk}/progress-over-time/"
    assert api.get(url).json()["total"] == 4
    a = phase_with_history.assignments.filter(labeler=labelers[1], done_at__isnull=True).first()
    submit(phase_with_history, labelers[1], a.image_id, tones=[3])
    data = api.get(url).json()
    assert data["total"] == 5 and data["labelers"][1]["total"] == 2
    assert data["last_day"] == datetime.now(UTC).date().isoformat()


def test_the_phase_page_draws_the_chart(phase_with_history, lead, client):
    client.force_login(lead)
    html = client.get(f"/phases/{phase_with_history.pk}/").content.decode()
    assert "Labels per day" in html and "<svg" in html
    assert "<title>L1, 2026-11-28: 2 labels</title>" in html
    assert "<title>L2, 2026-11-30: 1 label</title>" in html
    assert "L1: 3" in html and "L2: 1" in html
    assert "http://" not in html.split("<svg", 1)[1].split("</svg>", 1)[0].replace("http://www.w3.org", "")


def test_a_phase_without_labels_says_so(project, labelers, lead, client):
    add_images(project, 2)
    phase = open_calibration_1(project, size=2, cal1=2, labels_per_image=1)
    client.force_login(lead)
    html = client.get(f"/phases/{phase.pk}/").content.decode()
    assert "Labels per day" in html and "No labels yet." in html


def test_the_chart_stacks_each_days_labelers_to_the_days_total():
    progress = {
        "days": ["2026-11-28", "2026-11-29", "2026-11-30"],
        "labelers": [
            {"pseudonym": "L1", "per_day": [2, 0, 7], "total": 9},
            {"pseudonym": "<b>L2</b>", "per_day": [3, 0, 1], "total": 4},
        ],
        "per_day": [5, 0, 8],
        "total": 13,
        "first_day": "2026-11-28",
        "last_day": "2026-11-30",
    }
    chart = plots.progress_chart(progress)
    plot_h = chart["baseline"] - chart["top"]
    y_max = max(t["label"] for t in chart["y_ticks"])
    assert y_max >= 8 and [t["label"] for t in chart["y_ticks"]][:2] == [0, 2]
    by_day: dict[float, float] = {}
    for bar in chart["bars"]:
        by_day[bar["x"]] = by_day.get(bar["x"], 0) + bar["h"]
        # Each stack rests on the baseline or on the bar below it.
        assert bar["y"] + bar["h"] <= chart["baseline"] + 0.01
    assert sorted(round(h / plot_h * y_max, 1) for h in by_day.values()) == [5.0, 8.0]
    assert len(chart["bars"]) == 4  # no bar for a zero
    assert plots.progress_chart({**progress, "days": []}) == {"empty": True}


def test_the_chart_escapes_pseudonyms(phase_with_history, lead, client, labelers):
    labelers[0].pseudonym = "<script>x</script>"
    labelers[0].save()
    client.force_login(lead)
    html = client.get(f"/phases/{phase_with_history.pk}/").content.decode()
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
