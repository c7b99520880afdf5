"""factory_boy factories for the labeling models."""

import io

import factory
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from PIL import Image as PILImage

from labeling.models import Membership, Project, Scale
from labeling.services.images import image_create_from_bytes


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-test-123")


def monk_scale() -> Scale:
    from labeling.services.scales import scales_ensure_builtin

    scales_ensure_builtin()  # transactional tests flush the rows the data migration made
    return Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True)


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    name = factory.Sequence(lambda n: f"Project {n}")
    scale = factory.LazyFunction(monk_scale)
    labels_per_image = 3
    skip_reasons = ["no skin visible", "image unusable", "other"]

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        """Go through the real service, which also lays out the four phases."""
        from labeling.services.projects import project_create

        kwargs.setdefault("created_by", None)
        return project_create(**kwargs)


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.LABELER
    pseudonym = factory.Sequence(lambda n: f"L{n:03d}")


def make_lead(username: str = "lead"):
    """A project lead: may create projects (the ``labeling.add_project`` permission), not staff."""
    from django.contrib.auth.models import Permission

    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_project", content_type__app_label="labeling"))
    return user


def make_labelers(project, *, prefix: str = "") -> list:
    """Four labelers of ``project``, L1..L4 (users ``<prefix>labeler1``..4)."""
    return [
        MembershipFactory(project=project, user=UserFactory(username=f"{prefix}labeler{i}"), pseudonym=f"L{i}")
        for i in range(1, 5)
    ]


def png_bytes(colour=(160, 126, 86), size=(64, 48), mode="RGB", fmt="PNG", **save_kwargs) -> bytes:
    buf = io.BytesIO()
    img = PILImage.new("RGB", size, colour)
    if mode != "RGB":
        img = img.convert(mode)
    img.save(buf, format=fmt, **save_kwargs)
    return buf.getvalue()


def make_image(project, *, colour=(160, 126, 86), name=None, **kwargs):
    """Create an image in ``project`` through the real ingestion service."""
    data = png_bytes(colour=colour, size=kwargs.pop("size", (64, 48)))
    name = name or f"img-{colour[0]}-{colour[1]}-{colour[2]}.png"
    return image_create_from_bytes(project=project, filename=name, data=data, **kwargs)


__all__ = ["ContentFile"]
