"""Django 5.2 against a PostgreSQL server (PostgreSQL itself or `pgtier
serve`), with the connection in libpq's variables (PGHOST, PGPORT,
PGUSER, PGPASSWORD, PGDATABASE): `migrate` of the built-in apps (auth,
admin, contenttypes, sessions) into an empty database, then create,
query, update and delete a user, a group, permissions, an admin log entry
and a session through the ORM. Prints one line per step; the transcripts
of the two servers must be equal."""

import io
import os
from datetime import timedelta

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="driver-transcript",
    USE_TZ=True,
    INSTALLED_APPS=[
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
    ],
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("PGDATABASE", "postgres"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "PASSWORD": os.environ.get("PGPASSWORD", ""),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
        }
    },
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
    SESSION_ENGINE="django.contrib.sessions.backends.db",
)
django.setup()

from django.contrib.admin.models import ADDITION, LogEntry  # noqa: E402
from django.contrib.auth.models import Group, Permission, User  # noqa: E402
from django.contrib.contenttypes.models import ContentType  # noqa: E402
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.contrib.sessions.models import Session  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402


def out(*parts):
    print(" | ".join(str(p) for p in parts), flush=True)


migrate_log = io.StringIO()
call_command("migrate", interactive=False, verbosity=1, stdout=migrate_log)
for line in migrate_log.getvalue().splitlines():
    if line.strip().startswith("Applying"):
        out("migrate", line.strip())

with connection.cursor() as c:
    c.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'auth_user' ORDER BY indexname"
    )
    out("auth_user indexes", [r[0] for r in c.fetchall()])

out("content types", ContentType.objects.count(), "permissions", Permission.objects.count())

alice = User.objects.create_user("alice", "alice@example.com", "s3cret", first_name="Alice")
bob = User.objects.create_user("bob", "bob@example.com", "hunter2")
out("created", alice.username, bob.username, alice.pk is not None, bob.pk is not None)
out("check_password", User.objects.get(username="alice").check_password("s3cret"))

try:
    with transaction.atomic():
        User.objects.create_user("alice", "other@example.com", "x")
    out("duplicate username", "accepted")
except IntegrityError as e:
    out("duplicate username", type(e).__name__, e.__cause__.sqlstate)

editors = Group.objects.create(name="editors")
editors.permissions.set(Permission.objects.filter(codename__in=["add_user", "change_user"]))
alice.groups.add(editors)
out("alice perms", sorted(User.objects.get(username="alice").get_all_permissions()))
out("startswith", list(User.objects.filter(username__startswith="al").values_list("username", flat=True)))
out("icontains", list(User.objects.filter(email__icontains="EXAMPLE").order_by("username").values_list("username", flat=True)))

# Django declares every foreign key DEFERRABLE INITIALLY DEFERRED: a row may
# precede the row it references within a transaction, and an orphan fails at
# COMMIT (23503), not at the INSERT.
with transaction.atomic():
    with connection.cursor() as c:
        c.execute("INSERT INTO auth_user_groups (user_id, group_id) VALUES (%s, %s)", [alice.pk, 4242])
        c.execute("INSERT INTO auth_group (id, name) VALUES (4242, 'late')")
out("deferred fk", Group.objects.filter(id=4242).exists(), alice.groups.filter(id=4242).exists())
try:
    with transaction.atomic():
        with connection.cursor() as c:
            c.execute("INSERT INTO auth_user_groups (user_id, group_id) VALUES (%s, %s)", [alice.pk, 4343])
            out("orphan insert", "accepted until commit")
    out("orphan commit", "accepted")
except IntegrityError as e:
    out("orphan commit", type(e).__name__, e.__cause__.sqlstate)
with connection.cursor() as c:
    c.execute(
        "SELECT conname, condeferrable, condeferred FROM pg_constraint "
        "WHERE conrelid = 'auth_user_groups'::regclass AND contype = 'f' ORDER BY conname"
    )
    out("auth_user_groups fks", c.fetchall())

LogEntry.objects.log_actions(
    user_id=alice.pk,
    queryset=[bob],
    action_flag=ADDITION,
    change_message="added bob",
    single_object=True,
)
entry = LogEntry.objects.get()
out("log entry", entry.object_repr, entry.action_flag, entry.content_type.model, entry.user.username)

session = SessionStore()
session["user"] = alice.username
session["cart"] = [1, 2, 3]
session.set_expiry(timedelta(hours=1))
session.create()
key = session.session_key
loaded = SessionStore(session_key=key)
out("session", loaded["user"], loaded["cart"], Session.objects.filter(expire_date__gt=timezone.now()).count())

User.objects.filter(username="bob").update(is_staff=True, last_name="Builder")
bob.refresh_from_db()
out("updated", bob.is_staff, bob.last_name)
alice.email = "alice@example.org"
alice.save(update_fields=["email"])
out("saved", User.objects.get(pk=alice.pk).email)
out("staff", list(User.objects.filter(is_staff=True).values_list("username", flat=True)))

loaded.delete()
out("session deleted", Session.objects.filter(session_key=key).exists())
deleted = User.objects.filter(username="bob").delete()
out("bob deleted", deleted)
out("users", list(User.objects.order_by("username").values_list("username", flat=True)))
editors.delete()
out("groups", Group.objects.count(), "alice groups", alice.groups.count())
