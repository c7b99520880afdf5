from django.db import migrations


def create_builtin_scales(apps, schema_editor):
    from labeling.services.scales import scales_ensure_builtin

    scales_ensure_builtin(apps.get_model("labeling", "Scale"), apps.get_model("labeling", "Tone"))


class Migration(migrations.Migration):
    dependencies = [("labeling", "0001_initial")]

    operations = [migrations.RunPython(create_builtin_scales, migrations.RunPython.noop)]
