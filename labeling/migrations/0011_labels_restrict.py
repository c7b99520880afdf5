# Issue 13: RESTRICT instead of PROTECT on the paths to labels (a project deleted on purpose takes its labels).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0010_basics_project_archived"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="label",
            name="labeler",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.RESTRICT, related_name="labels", to="labeling.membership"
            ),
        ),
        migrations.AlterField(
            model_name="membership",
            name="user",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.RESTRICT, related_name="memberships", to=settings.AUTH_USER_MODEL
            ),
        ),
    ]
