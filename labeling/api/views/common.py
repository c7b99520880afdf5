"""What several API views share about their parameters and answers: id bounds, documented value
patterns, a phase as each role sees it."""

from drf_spectacular.utils import PolymorphicProxySerializer

#: The largest id the database stores (a signed 64-bit integer): a larger one names nothing, and is
#: refused as such before it reaches the driver (``bigint out of range`` on PostgreSQL, an
#: ``OverflowError`` on SQLite).
MAX_ID = 2**63 - 1

#: ``attr=key:value``: a key of letters, digits and single underscores (``services.attributes``).
ATTRIBUTE_FILTER = r"^[^\W_]+(_[^\W_]+)*:"


def baseline_flag_names() -> list[str]:
    from ...services import baselines as baseline_services

    return list(baseline_services.FLAG_NAMES)


def phase_for_role(*, many: bool = False) -> PolymorphicProxySerializer:
    """A phase as a lead or reviewer sees it (``Phase``), or as a labeler does (``LabelerPhase``, brief).

    ``PhaseForRole`` is ``anyOf`` in the document (``labeling.api.schema.postprocess``): a lead's
    phase has every field of a labeler's."""
    from .. import serializers as s

    return PolymorphicProxySerializer(
        component_name="PhaseForRole",
        serializers=[s.PhaseSerializer, s.LabelerPhaseSerializer],
        resource_type_field_name=None,
        many=many,
    )
