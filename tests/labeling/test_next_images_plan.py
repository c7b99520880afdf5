"""The "next two images" lookup uses the open-queue partial index however stale the statistics (issue 24).

Right after a phase opens, the statistics say no assignment is done; the planner then took the unique
(phase, labeler, position) index and walked past every image the labeler had done, until autovacuum
re-analysed the table. The unique constraint now starts with ``position`` (migration 0019), so only the
partial index ``assignment_open_queue`` serves the ordered lookup. PostgreSQL only (EXPLAIN, the planner).
"""

import pytest
from django.db import connection

from labeling.models import Assignment, Membership, Phase, Scale
from labeling.selectors import assignment_queue
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from tests.factories import UserFactory, make_image

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the query plan is PostgreSQL's (CI stage 2 runs PostgreSQL)"
    ),
]

N_IMAGES, N_DONE = 25_000, 5_000


def test_next_two_images_use_the_partial_index_at_5000_done_images_with_statistics_from_the_phase_open():
    scales_ensure_builtin()
    lead = UserFactory()
    project = project_create(
        name="plan", scale=Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True), created_by=lead
    )
    phase = project.phases.get(kind=Phase.Kind.MAIN)
    labelers = [
        Membership.objects.create(project=project, user=UserFactory(), role=Membership.Role.LABELER, pseudonym=f"L{i}")
        for i in range(4)
    ]
    seed = make_image(project)
    image = Assignment._meta.get_field("image").related_model._meta.db_table
    assignment = Assignment._meta.db_table
    with connection.cursor() as cursor:
        # N_IMAGES images (copies of one row: the lookup never opens the files), queued to every labeler.
        cursor.execute(
            f"""INSERT INTO {image} (project_id, external_id, original, original_filename, sha256, file_size, format,
                source_mode, exif_orientation, width, height, attributes, mask, mask_kind, display, thumbnail,
                derivative_status, derivative_error, is_synthetic, created_at)
            SELECT project_id, 'copy-' || g, original, original_filename, md5(g::text) || md5(g::text), file_size,
                format, source_mode, exif_orientation, width, height, attributes, mask, mask_kind, display, thumbnail,
                derivative_status, derivative_error, is_synthetic, created_at
            FROM {image}, generate_series(1, %s) g WHERE id = %s""",
            [N_IMAGES - 1, seed.id],
        )
        cursor.execute(
            f"""INSERT INTO {assignment} (phase_id, labeler_id, image_id, position, is_repeat, kind, request_reason,
                created_at)
            SELECT %s, m.id, i.id, row_number() OVER (PARTITION BY m.id ORDER BY i.id), FALSE, 'label', '', now()
            FROM {image} i CROSS JOIN unnest(%s::bigint[]) AS m(id) WHERE i.project_id = %s""",
            [phase.id, [m.id for m in labelers], project.id],
        )
        # The statistics as right after the phase opened: nothing done yet.
        cursor.execute(f"ANALYZE {assignment}")
    labeler = labelers[0]
    Assignment.objects.filter(phase=phase, position__lte=N_DONE).update(done_at=lead.date_joined)

    statements = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        queue = assignment_queue(phase=phase, labeler=labeler)
    assert [a.position for a in queue] == [N_DONE + 1, N_DONE + 2]
    sql, params = statements[-1]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    scans = [n for n in nodes(plan[0]["Plan"]) if n.get("Relation Name") == assignment]
    assert [n.get("Index Name") for n in scans] == ["assignment_open_queue"], plan
    assert all(n.get("Rows Removed by Filter", 0) == 0 for n in scans), plan
