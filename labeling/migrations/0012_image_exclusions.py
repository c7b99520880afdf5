# Issue 14: a lead excludes images from the dataset in the data manager, with the reason (and includes them again).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0011_labels_restrict"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ImageExclusion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("reason", models.TextField()),
                ("excluded_at", models.DateTimeField(auto_now_add=True)),
                ("included_at", models.DateTimeField(blank=True, null=True)),
                ("included_note", models.TextField(blank=True)),
                (
                    "excluded_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "image",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="exclusions", to="labeling.image"
                    ),
                ),
                (
                    "included_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["image_id", "-excluded_at", "-id"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("reason", ""), _negated=True), name="exclusion_has_reason"
                    ),
                    models.UniqueConstraint(
                        condition=models.Q(("included_at__isnull", True)), fields=("image",), name="one_open_exclusion"
                    ),
                ],
            },
        ),
    ]
