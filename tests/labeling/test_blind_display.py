"""Issue 13, item 8: nothing but pixels reaches a blind labeler.

The original JPEG's COM comment was copied into the display file, and the display response named the
original's SHA-256 (``Content-Disposition``), either of which lets a labeler match the photo against a
known dataset.
"""

import io

import pytest
from PIL import Image as PILImage

from labeling.services.images import image_create_from_bytes
from tests.labeling.helpers import open_calibration_1

pytestmark = pytest.mark.django_db

SECRET = b"CelebA 000123 / subject 42"


def jpeg_with_metadata() -> bytes:
    img = PILImage.new("RGB", (320, 240), (181, 140, 110))
    exif = PILImage.Exif()
    exif[0x010E] = "ImageDescription: " + SECRET.decode()  # ImageDescription
    exif[0x013B] = "Photographer Name"  # Artist
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=90, comment=SECRET, exif=exif.tobytes())
    return buffer.getvalue()


def test_the_display_file_and_its_response_carry_no_metadata(project, labelers, client):
    image = image_create_from_bytes(project=project, filename="celeb-000123.jpg", data=jpeg_with_metadata())
    phase = open_calibration_1(project, size=1, cal1=1)
    m = labelers[0]
    assert phase.assignments.filter(labeler=m, image=image).exists()
    client.force_login(m.user)
    for kind in ("display",):
        r = client.get(f"/images/{image.id}/file/{kind}/")
        assert r.status_code == 200
        body = b"".join(r.streaming_content)
        assert SECRET not in body and b"Photographer" not in body and b"celeb" not in body
        served = PILImage.open(io.BytesIO(body))
        assert "comment" not in served.info and "exif" not in served.info
        for header, value in r.headers.items():
            assert image.sha256 not in value and "celeb" not in value.lower(), header
    # The thumbnail (leads' pages) is made the same way.
    image.refresh_from_db()
    with image.thumbnail.open("rb") as handle:
        assert SECRET not in handle.read()
