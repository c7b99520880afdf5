"""The demo project: synthetic portraits and skin patches, plus scikit-image's astronaut photo.

There is no internet on the machines this runs on, so the demo makes its own
images: faces and patches in the ten Monk Skin Tone colours under varied
exposure and white balance. The UI says they are synthetic.
"""

import io
import uuid

import numpy as np
from django.contrib.auth import get_user_model
from django.db import transaction
from PIL import Image as PILImage

from ..models import ImportBatch, Membership, Project, Subject
from .images import DuplicateImage, image_create_from_bytes
from .imports.report import ImportReport, report_start
from .labels import label_submit
from .phases import calibration_configure, phase_get, phase_open
from .projects import project_create
from .scales import MONK_TONES

DEMO_PASSWORD = "fairtone-demo"
DEMO_NAME = "Demo: skin tone of synthetic portraits"
DEMO_LABELERS = [
    (
        "labeler1",
        {
            "expertise": "dermatology nurse",
            "region_of_upbringing": "West Africa",
            "gender": "woman",
            "share_profile": True,
        },
    ),
    ("labeler2", {"expertise": "photographer", "region_of_upbringing": "South Asia", "gender": "man"}),
    (
        "labeler3",
        {
            "expertise": "ML engineer",
            "region_of_upbringing": "Northern Europe",
            "gender": "non-binary",
            "share_profile": True,
        },
    ),
    ("labeler4", {"expertise": "retail stylist", "region_of_upbringing": "Latin America", "gender": "woman"}),
]


def _srgb_to_linear(c: np.ndarray) -> np.ndarray:
    c = c / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb(c: np.ndarray) -> np.ndarray:
    c = np.clip(c, 0, 1)
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * c ** (1 / 2.4) - 0.055) * 255.0


def synthetic_portrait(
    hex_colour: str,
    *,
    exposure_stops: float = 0.0,
    white_balance: tuple[float, float, float] = (1, 1, 1),
    seed: int = 0,
    size: tuple[int, int] = (480, 640),
    shirt: tuple[int, int, int] = (60, 90, 140),
    with_mask: bool = False,
) -> bytes | tuple[bytes, bytes]:
    """A simple shaded head-and-shoulders figure in ``hex_colour`` as JPEG bytes.

    With ``with_mask``, also a PNG skin mask (face and neck, without eyes and
    mouth): the demo knows where the skin is, as a user-supplied segmentation would.
    """
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    skin = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.float32)
    skin_lin = _srgb_to_linear(skin)
    bg = np.array(rng.integers(90, 200, 3), dtype=np.float32)
    img = np.empty((h, w, 3), np.float32)
    img[:] = _srgb_to_linear(bg) * (0.85 + 0.15 * (yy / h))[..., None]
    # Shoulders and shirt.
    body = ((xx - w / 2) / (w * 0.48)) ** 2 + ((yy - h * 1.05) / (h * 0.42)) ** 2 <= 1
    img[body] = _srgb_to_linear(np.array(shirt, np.float32))
    # Neck and face, shaded by a soft light from the upper left.
    neck = (np.abs(xx - w / 2) < w * 0.09) & (yy > h * 0.45) & (yy < h * 0.72)
    face = ((xx - w / 2) / (w * 0.2)) ** 2 + ((yy - h * 0.38) / (h * 0.22)) ** 2 <= 1
    shade = 1.0 - 0.35 * np.clip(((xx - w * 0.4) / w) + ((yy - h * 0.25) / h), 0, 1)
    for region in (neck, face):
        img[region] = skin_lin * shade[region][:, None]
    # Eyes and mouth, so it reads as a face.
    for ex in (0.43, 0.57):
        eye = ((xx - w * ex) / (w * 0.03)) ** 2 + ((yy - h * 0.36) / (h * 0.012)) ** 2 <= 1
        img[eye] = 0.02
        face = face & ~eye
    mouth = ((xx - w / 2) / (w * 0.06)) ** 2 + ((yy - h * 0.48) / (h * 0.01)) ** 2 <= 1
    img[mouth] = skin_lin * 0.35
    skin_mask = (face | neck) & ~mouth
    img *= 2.0**exposure_stops
    img *= np.asarray(white_balance, np.float32)
    img += rng.normal(0, 0.004, img.shape).astype(np.float32)
    rgb = _linear_to_srgb(img).round().astype(np.uint8)
    buf = io.BytesIO()
    PILImage.fromarray(rgb).save(buf, format="JPEG", quality=90)
    if not with_mask:
        return buf.getvalue()
    mask = io.BytesIO()
    PILImage.fromarray((skin_mask * 255).astype(np.uint8)).save(mask, format="PNG")
    return buf.getvalue(), mask.getvalue()


def astronaut_bytes() -> bytes:
    from skimage import data

    buf = io.BytesIO()
    PILImage.fromarray(data.astronaut()).save(buf, format="JPEG", quality=92)
    return buf.getvalue()


#: What the demo's labelers read (both projects; the finished study's data card shows it).
DEMO_INSTRUCTIONS = (
    "<p>Choose the Monk Skin Tone that best matches the <strong>skin of the face and neck</strong>, "
    "ignoring lighting where you can. If you hesitate between two neighbouring tones, choose both "
    "(Shift + digit). Mark <em>uncertain</em> when the image makes judging hard.</p>"
    "<ul><li>Do not infer tone from facial features or clothing.</li>"
    "<li>Beware of background colours and of a run of similar tones.</li></ul>"
)


@transaction.atomic
def demo_project_create(*, n_subjects: int = 20, simulate_labels: bool = True) -> Project:
    """Create (or return) the demo project with its lead, four labelers and ~40 images."""
    User = get_user_model()
    existing = Project.objects.filter(is_demo=True, name=DEMO_NAME).first()
    if existing is not None:
        return existing
    lead, _ = User.objects.get_or_create(username="lead", defaults={"is_staff": True, "is_superuser": True})
    lead.set_password(DEMO_PASSWORD)
    lead.save()
    project = project_create(
        name=DEMO_NAME,
        description="A demo with synthetic images only (plus scikit-image's astronaut photo).",
        created_by=lead,
        labels_per_image=4,
        instructions=DEMO_INSTRUCTIONS,
        is_demo=True,
    )
    members = []
    for username, profile in DEMO_LABELERS:
        user, _ = User.objects.get_or_create(username=username)
        user.set_password(DEMO_PASSWORD)
        user.save()
        members.append(
            Membership.objects.create(
                project=project,
                user=user,
                role=Membership.Role.LABELER,
                pseudonym=f"L{len(members) + 1:02d}",
                **profile,
            )
        )
    rng = np.random.default_rng(2026)
    genders = ["woman", "man"]
    true_tone = {}
    # One import (and one job for its display images and baselines) like a lead's, on the jobs page.
    demo_import = report_start(project, ImportBatch.Kind.DEMO, "synthetic demo portraits", lead)
    for s in range(n_subjects):
        tone = (s % 10) + 1
        subject = Subject.objects.create(
            project=project,
            external_id=f"S{s + 1:03d}",
            attributes={"gender": genders[s % 2], "body_shape": round(float(rng.normal(0, 1)), 2), "synthetic": True},
        )
        for shot in range(2):
            exposure = float(rng.choice([-1.0, -0.5, 0.0, 0.0, 0.5]))
            wb = tuple(float(x) for x in rng.choice([[1, 1, 1], [1.08, 1.0, 0.9], [0.92, 1.0, 1.1]]))
            # Half the subjects come with a skin mask (as from a segmentation tool); the others rely
            # on the rule-based skin detector, whose misses on very light and very deep skin show.
            with_mask = s % 2 == 0
            data = synthetic_portrait(
                MONK_TONES[tone - 1][2],
                exposure_stops=exposure,
                white_balance=wb,
                seed=s * 10 + shot,
                shirt=tuple(int(x) for x in rng.integers(30, 220, 3)),
                with_mask=with_mask,
            )
            data, mask = data if with_mask else (data, None)
            try:
                image = image_create_from_bytes(
                    project=project,
                    filename=f"S{s + 1:03d}_{shot + 1}.jpg",
                    data=data,
                    subject=subject,
                    attributes={
                        "exposure_stops": exposure,
                        "white_balance": ",".join(f"{x:g}" for x in wb),
                        "pose": ["front", "side"][shot],
                    },
                    is_synthetic=True,
                    mask_data=mask,
                    mask_kind="skin" if mask else "",
                    batch=demo_import.batch,
                    job=demo_import.job,
                )
            except DuplicateImage:
                continue
            true_tone[image.id] = tone
    image = image_create_from_bytes(
        project=project,
        filename="astronaut.jpg",
        data=astronaut_bytes(),
        attributes={"source": "scikit-image data.astronaut (public domain, NASA)"},
        batch=demo_import.batch,
        job=demo_import.job,
    )
    true_tone[image.id] = 3
    _demo_import_finish(demo_import, len(true_tone))
    size = min(16, len(true_tone))
    calibration_configure(project=project, size=size, calibration_1_size=min(8, size), n_repeated=min(4, size), seed=59)
    cal1 = phase_get(project, "calibration_1")
    cal1 = phase_open(phase=cal1)
    if simulate_labels:
        # Labelers 2-4 have already labelled calibration 1 (simulated, with per-labeler bias and noise);
        # labeler1 has not, so the demo can be tried from the labeler's side.
        _simulate_phase(cal1, members[1:], true_tone, rng, biases=[0.0, 0.6, -0.4], noise=0.7)
    return project


FINISHED_NAME = "Demo: a finished study (all phases, simulated labels)"


def _demo_import_finish(demo_import: ImportReport, n_images: int) -> None:
    demo_import.batch.n_imported = n_images
    demo_import.finish()


def _simulate_phase(phase, members, true_tone, rng, *, biases, noise=0.6, drift=None) -> None:
    """Every labeler answers their whole queue: true tone + own bias (+ drift) + noise."""
    drift = drift or {}
    for k, m in enumerate(members):
        for a in phase.assignments.filter(labeler=m, done_at__isnull=True).order_by("position"):
            if rng.random() < 0.02:
                label_submit(
                    phase=phase,
                    labeler=m,
                    image_id=a.image_id,
                    client_id=uuid.uuid4(),
                    skip_reason="image unusable",
                    time_spent_ms=int(rng.integers(1500, 4000)),
                )
                continue
            value = true_tone[a.image_id] + biases[k] + drift.get(k, 0.0) + rng.normal(0, noise)
            tone = int(np.clip(round(value), 1, 10))
            tones = [tone, tone + 1] if (value - tone > 0.3 and tone < 10) else [tone]
            label_submit(
                phase=phase,
                labeler=m,
                image_id=a.image_id,
                client_id=uuid.uuid4(),
                tones=tones,
                uncertain=bool(rng.random() < 0.08),
                time_spent_ms=int(rng.integers(2500, 9000)),
                tone_order=list(range(1, 11)),
                client_info={"simulated": True},
            )


@transaction.atomic
def demo_finished_study_create(*, lead, n_subjects: int = 24) -> Project:
    """A second demo project whose four phases have all run (simulated), so the consensus
    dashboard shows calibration vs main, test-retest, drift and bias, and the baseline
    comparison has labels to compare with."""
    from .phases import phase_close

    existing = Project.objects.filter(name=FINISHED_NAME, is_demo=True).first()
    if existing is not None:
        return existing
    User = get_user_model()
    project = project_create(
        name=FINISHED_NAME,
        created_by=lead,
        labels_per_image=3,
        is_demo=True,
        instructions=DEMO_INSTRUCTIONS,
        description="Synthetic portraits with skin masks; every label is simulated (per-labeler bias and noise).",
    )
    members = []
    for username, profile in DEMO_LABELERS:
        user = User.objects.get(username=username)
        members.append(
            Membership.objects.create(
                project=project,
                user=user,
                role=Membership.Role.LABELER,
                pseudonym=f"L{len(members) + 1:02d}",
                **profile,
            )
        )
    rng = np.random.default_rng(7)
    true_tone = {}
    demo_import = report_start(project, ImportBatch.Kind.DEMO, "synthetic demo portraits with skin masks", lead)
    for s in range(n_subjects):
        # Deeper tones under-represented, as the seed found in practice.
        tone = int(rng.choice(np.arange(1, 11), p=[0.14, 0.16, 0.16, 0.14, 0.12, 0.1, 0.07, 0.05, 0.03, 0.03]))
        if s >= n_subjects - 2:
            # Rare, not absent: the last two people are MST 9 and 10, so the deep end of the baseline
            # audit, the tone bands and the card has data (the draw above still runs, so the other
            # people's tones are as before).
            tone = 10 - (n_subjects - 1 - s)
        subject = Subject.objects.create(
            project=project,
            external_id=f"F{s + 1:03d}",
            attributes={"gender": ["woman", "man"][s % 2], "body_shape": round(float(rng.normal(0, 1)), 2)},
        )
        for shot in range(2):
            exposure = float(rng.choice([-0.5, 0.0, 0.0, 0.5]))
            data, mask = synthetic_portrait(
                MONK_TONES[tone - 1][2],
                exposure_stops=exposure,
                seed=1000 + s * 10 + shot,
                shirt=tuple(int(x) for x in rng.integers(30, 220, 3)),
                with_mask=True,
            )
            image = image_create_from_bytes(
                project=project,
                filename=f"F{s + 1:03d}_{shot + 1}.jpg",
                data=data,
                subject=subject,
                attributes={"exposure_stops": exposure},
                is_synthetic=True,
                mask_data=mask,
                mask_kind="skin",
                batch=demo_import.batch,
                job=demo_import.job,
            )
            true_tone[image.id] = tone
    _demo_import_finish(demo_import, len(true_tone))
    size = min(16, len(true_tone) - 1)  # leave at least one image for the main phase
    cal1_size = max(1, size * 5 // 8)
    calibration_configure(
        project=project, size=size, calibration_1_size=cal1_size, n_repeated=min(6, cal1_size), seed=2026
    )
    biases = [0.0, 0.5, -0.4, 0.1]
    cal1 = phase_open(phase=phase_get(project, "calibration_1"), labels_per_image=4)
    _simulate_phase(cal1, members, true_tone, rng, biases=biases)
    phase_close(phase=cal1)
    cal2 = phase_open(phase=phase_get(project, "calibration_2"), labels_per_image=4)
    _simulate_phase(cal2, members, true_tone, rng, biases=biases, drift={2: 0.6})  # L03 drifts deeper
    phase_close(phase=cal2)
    main = phase_open(phase=phase_get(project, "main"), labels_per_image=3)
    _simulate_phase(main, members, true_tone, rng, biases=biases, noise=0.7)
    phase_close(phase=main)
    phase_open(phase=phase_get(project, "post_calibration"))
    return project
