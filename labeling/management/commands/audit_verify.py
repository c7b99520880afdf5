"""``manage.py audit_verify``: follow the audit log's hash chain and check who may change the table.

Exit status 0 when every entry's ``chain_hash`` is the hash of its fields after its predecessor's; 1 otherwise,
naming the first entries whose hash does not follow (changed, removed before it, or slipped in). On PostgreSQL
it also says which roles other than the table's owner may UPDATE, DELETE or TRUNCATE it, and whether the app
connects as the owner (warnings; with ``--privileges`` they fail the check too: a production deployment).
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from labeling.models.audit import GENESIS, AuditEntry, entry_hash

TABLE = AuditEntry._meta.db_table


def chain_breaks(limit: int = 5) -> tuple[int, list[str]]:
    """(entries checked, descriptions of the first ``limit`` entries whose hash does not follow)."""
    previous, checked, problems = GENESIS, 0, []
    for entry in AuditEntry.objects.order_by("id").iterator(chunk_size=2000):
        checked += 1
        expected = entry_hash(previous, entry)
        if entry.chain_hash != expected:
            problems.append(
                f"entry {entry.pk} ({entry.created_at:%Y-%m-%d %H:%M:%S} {entry.action}): its hash does not follow "
                "the entry before it: this entry or one before it was changed, removed or inserted"
            )
            if len(problems) >= limit:
                break
        # Follow the stored hash: one changed entry is named once, not every entry after it.
        previous = entry.chain_hash
    return checked, problems


def privilege_problems() -> list[str]:
    """On PostgreSQL: roles other than the owner that may change or empty the audit table."""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = current_schema() AND tablename = %s", [TABLE]
        )
        row = cursor.fetchone()
        owner = row[0] if row else None
        cursor.execute(
            "SELECT grantee, string_agg(privilege_type, ', ' ORDER BY privilege_type) "
            "FROM information_schema.role_table_grants WHERE table_schema = current_schema() AND table_name = %s "
            "AND privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE') AND grantee <> %s GROUP BY grantee",
            [TABLE, owner],
        )
        problems = [f"role {grantee} may {privileges} the audit table" for grantee, privileges in cursor.fetchall()]
        cursor.execute("SELECT current_user")
        (user,) = cursor.fetchone()
    if user == owner:
        problems.append(
            f"the app connects as {user}, the audit table's owner, which can disable its triggers and rewrite it: "
            "run the app as a role of its own (deploy/postgres/10-fairtone-roles.sh, .env.example)"
        )
    return problems


class Command(BaseCommand):
    help = "Verify the audit log's hash chain (and, on PostgreSQL, that only the table's owner may change it)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--privileges",
            action="store_true",
            help="fail too when a role other than the owner may change the table or the app connects as its owner",
        )

    def handle(self, *args, **options):
        checked, breaks = chain_breaks()
        privileges = privilege_problems()
        for line in breaks:
            self.stderr.write(line)
        for line in privileges:
            self.stderr.write(("" if options["privileges"] else "warning: ") + line)
        if not options["privileges"]:
            privileges = []
        if breaks or privileges:
            raise CommandError(
                f"audit log: {len(breaks)} break(s) in the chain of {checked} entries, "
                f"{len(privileges)} privilege problem(s)" + (f"; first: {breaks[0]}" if breaks else "")
            )
        self.stdout.write(f"audit log: {checked} entries, chain intact")
