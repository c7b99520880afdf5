"""Benchmark one image's colorimetric baseline job step: statistics and overlay (issue 24).

Run: ``python bench/bench_baseline_image.py [--repeat N]``. A throw-away SQLite database and media folder;
the images are imported through the app's own service (``image_create_from_bytes``):

- a 512 x 512 portrait (the astronaut of the colorimetry tests, face recoloured to MST 6), PNG;
- the same portrait as a 480 x 640 JPEG (the demo's size) and enlarged to a 4000 x 3000 JPEG (12 MP);
- a group photo of three such portraits side by side, measured as one person's box.

For each, in the same run: ``labeling.services.baselines.measure.image_measure`` (what the job runs per image:
the statistics and the overlay PNG) against ``colorimetry.measure_image`` alone on the same file with the
same options (the statistics only). The overlay draws the pixels the statistics measured (no second
skin detection), so the ratio is the overlay's whole cost (storage, resizing the selection, the PNG).
Goal: ratio <= 1.25 on every image. Session 35, this bench run on the code before and after, on a shared
2-core machine: before (the overlay decoded the image again and ran the skin detector a second time at
overlay size) 1.60-2.06x; after 1.04-1.13x.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _timed(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _encode(rgb: np.ndarray, fmt: str, size: tuple[int, int] | None = None) -> bytes:
    image = PILImage.fromarray(rgb)
    if size is not None:
        image = image.resize(size, PILImage.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def main(repeat: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-baseline-image-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{work / 'db.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    os.environ["FAIRTONE_MEDIA_ROOT"] = str(work / "media")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from colorimetry import measure_image
    from labeling.models import Scale
    from labeling.services.baselines import baseline_parameters_effective
    from labeling.services.baselines.measure import image_mask_kind, image_measure
    from labeling.services.baselines.parameters import stats_options
    from labeling.services.images import image_create_from_bytes
    from labeling.services.projects import project_create
    from labeling.services.scales import scales_ensure_builtin
    from tests.colorimetry import skin_evaluation_set as evaluation

    settings.MEDIA_ROOT = str(work / "media")
    call_command("migrate", verbosity=0)
    scales_ensure_builtin()
    lead = get_user_model().objects.create_user("lead", password="bench-pass-123")
    project = project_create(
        name="bench", scale=Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True), created_by=lead
    )
    portrait = evaluation.recoloured(evaluation.astronaut(), 6)
    group = np.concatenate([portrait, portrait[:, ::-1], portrait], axis=1)
    cases = [
        ("512 x 512 PNG", "a.png", _encode(portrait, "PNG"), None),
        ("480 x 640 JPEG", "b.jpg", _encode(portrait, "JPEG", (480, 640)), None),
        ("4000 x 3000 JPEG", "c.jpg", _encode(portrait, "JPEG", (4000, 3000)), None),
        ("group 1536 x 512 PNG, one box", "d.png", _encode(group, "PNG"), (512, 0, 512, 512)),
    ]
    parameters = baseline_parameters_effective(project)
    options = stats_options(parameters)
    print(f"{repeat} repeats, medians; parameters: skin detector {options['skin_detector']}")
    worst = 0.0
    for title, name, data, box in cases:
        image = image_create_from_bytes(project=project, filename=name, data=data, box=box)
        path = Path(settings.MEDIA_ROOT) / image.original.name
        region = {} if box is None else {"region": box}

        def job(image=image):
            stats, overlay, error = image_measure(image, parameters, image_mask_kind(image), final_attempt=True)
            assert not error and overlay, error

        def stats_alone(path=path, region=region):
            measure_image(path, max_pixels=parameters["max_pixels"], **region, **options)

        job()
        stats_alone()  # warm (the landmark model loads once per process)
        both, alone = _timed(job, repeat), _timed(stats_alone, repeat)
        worst = max(worst, both / alone)
        print(
            f"{title:32s} statistics + overlay {both * 1000:7.1f} ms; statistics alone {alone * 1000:7.1f} ms; "
            f"ratio {both / alone:.2f}x"
        )
    print(f"worst ratio {worst:.2f}x (goal: <= 1.25: the overlay costs no second detection)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    main(parser.parse_args().repeat)
