"""Users, API keys and the 401s of docs.md "Fix a 401 error", on SQLite and PostgreSQL."""
from __future__ import annotations

import hashlib
import re
import uuid
from datetime import timedelta

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from domain.error_mapping import key_refusal_error
from domain.errors import AccountSuspended, ApiError, InvalidApiKey, KeyDisabled, KeyRevoked, MissingAuthorization
from ledger.errors import KeyRefused, RevokedKey
from cluster.admin_cli import commands as admin
from ledger.accounts import keys
from ledger.store.coltypes import utcnow
from ledger.errors import NameRefused, StatusChangeRefused, TooManyKeys
from ledger.store.migrate import alembic_config, upgrade
from ledger.accounts.tables import ApiKey, KeyStatus, Role, Standing, User
from tests.ledger_fixtures import db_url, pg_url, run_in_thread, sessions  # noqa: F401

aio = pytest.mark.asyncio

MISSING = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
SUSPENDED = (
    "Your access to ACS Infra is suspended. Write to infra@acsresearch.org if you think this is a mistake."
)


async def make_key(sessions, user_name="alice", key_name="laptop"):
    async with sessions() as session, session.begin():
        user = await keys.user_by_name(session, user_name) or await keys.create_user(session, user_name)
        key, raw = await keys.create_api_key(session, user.id, key_name)
    return user, key, raw


# The key check's two ways in: in a session (the session API), and the API's own, one read on the
# pool's driver (authenticate_on). A test that takes `auth_path` runs on each.
AUTH_PATH = {"path": "session"}


@pytest.fixture(params=["session", "driver"])
def auth_path(request):
    AUTH_PATH["path"] = request.param
    yield request.param
    AUTH_PATH["path"] = "session"


async def auth(sessions, header):
    if AUTH_PATH["path"] == "driver":
        return await keys.authenticate_on(sessions.kw["bind"], sessions, header)
    async with sessions() as session:
        return await keys.authenticate(session, header)


async def refused(sessions, header, error_type):
    """The ledger's refusal, as the API answers it (domain/error_mapping.py)."""
    with pytest.raises(KeyRefused) as caught:
        await auth(sessions, header)
    answered = key_refusal_error(caught.value)
    assert type(answered) is error_type
    return answered


def assert_401(error: ApiError, code: str, message: str) -> None:
    assert error.status == 401
    body = error.body(None)["error"]
    assert body == {"message": message, "type": "invalid_request_error", "param": None, "code": code}


# Migrations -----------------------------------------------------------------
@aio
async def test_migrations_reach_head_and_rerun(db_url, sessions):
    await upgrade(db_url)  # a second start changes nothing
    head = ScriptDirectory.from_config(alembic_config(db_url)).get_current_head()
    async with sessions() as session:
        version = (await session.exec(text("SELECT version_num FROM alembic_version"))).one()
        tables = await (await session.connection()).run_sync(lambda c: inspect(c).get_table_names())
    assert version[0] == head
    assert {"users", "api_keys"} <= set(tables)


# Making users and keys --------------------------------------------------------
@aio
async def test_create_key_stores_only_its_hash(sessions):
    user, key, raw = await make_key(sessions)
    assert re.fullmatch(r"sk-acs-[A-Za-z0-9_-]{48}", raw)
    async with sessions() as session:
        stored = await session.get(ApiKey, key.id)
    assert stored.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert stored.prefix == raw[:11] and stored.prefix.startswith("sk-acs-")
    assert stored.status == KeyStatus.active and stored.user_id == user.id
    assert stored.created_at.utcoffset() == timedelta(0)


@aio
async def test_key_name_longer_than_32_is_refused(sessions):
    await make_key(sessions, key_name="x" * 32)
    with pytest.raises(NameRefused, match="at most 32 characters; this one has 33"):
        await make_key(sessions, key_name="y" * 33)
    with pytest.raises(NameRefused, match="needs a name"):
        await make_key(sessions, key_name="   ")


@aio
async def test_live_key_names_ignore_case_and_revoked_names_are_free(sessions):
    _, key, _ = await make_key(sessions, key_name="Laptop")
    with pytest.raises(NameRefused, match="'Laptop' already"):
        await make_key(sessions, key_name="laptop")
    async with sessions() as session, session.begin():
        await keys.set_key_status(session, key.id, KeyStatus.revoked)
    await make_key(sessions, key_name="laptop")


@aio
async def test_a_user_has_at_most_ten_live_keys(sessions):
    for number in range(10):
        await make_key(sessions, key_name=f"key-{number}")
    with pytest.raises(TooManyKeys) as caught:
        await make_key(sessions, key_name="one-more")
    assert str(caught.value) == (
        "You have 10 API keys, the most that a User may have. Delete one to make another."
    )


@aio
async def test_user_names_are_unique(sessions):
    await make_key(sessions)
    async with sessions() as session:
        with pytest.raises(NameRefused, match="exists already"):
            await keys.create_user(session, "alice")


# Authentication ---------------------------------------------------------------
@aio
async def test_authenticate_returns_the_principal(sessions, auth_path):
    user, key, raw = await make_key(sessions)
    principal = await auth(sessions, f"Bearer {raw}")
    assert principal == keys.Principal(user_id=user.id, key_id=key.id, key_name="laptop")
    assert isinstance(principal.user_id, uuid.UUID) and isinstance(principal.key_id, uuid.UUID)
    assert await auth(sessions, f"bearer  {raw} ") == principal  # the scheme ignores case


@aio
async def test_last_used_at_is_written_at_most_once_a_minute(sessions, auth_path):
    _, key, raw = await make_key(sessions)
    await auth(sessions, f"Bearer {raw}")
    first = await last_used(sessions, key.id)
    assert first is not None and utcnow() - first < timedelta(seconds=30)
    await auth(sessions, f"Bearer {raw}")
    assert await last_used(sessions, key.id) == first
    async with sessions() as session, session.begin():
        stored = await session.get(ApiKey, key.id)
        stored.last_used_at = first - timedelta(minutes=5)
    await auth(sessions, f"Bearer {raw}")
    assert await last_used(sessions, key.id) > first


async def last_used(sessions, key_id):
    async with sessions() as session:
        return (await session.get(ApiKey, key_id)).last_used_at


@aio
@pytest.mark.parametrize("header", [None, "", "   ", "Bearer", "Bearer   ", "Basic dXNlcjpwYXNz", "sk-acs-abc"])
async def test_missing_authorization(sessions, header, auth_path):
    error = await refused(sessions, header, MissingAuthorization)
    assert_401(error, "missing_authorization", MISSING)


@aio
@pytest.mark.parametrize("token", ["nonsense", "sk-acs-", "sk-acs-unknown", "acs-bm-unknown", "SK-ACS-x"])
async def test_invalid_api_key(sessions, token, auth_path):
    await make_key(sessions)
    error = await refused(sessions, f"Bearer {token}", InvalidApiKey)
    assert_401(error, "invalid_api_key", "Incorrect API key provided.")


@aio
async def test_a_key_of_the_old_platform_works_by_its_hash(sessions, auth_path):
    user, _, _ = await make_key(sessions)
    legacy = "acs-bm-0123456789abcdef"
    async with sessions() as session, session.begin():
        session.add(ApiKey(user_id=user.id, name="old", key_hash=keys.hash_key(legacy), prefix=legacy[:11]))
    assert (await auth(sessions, f"Bearer {legacy}")).key_name == "old"


@aio
async def test_revoked_key(sessions, auth_path):
    _, key, raw = await make_key(sessions)
    await set_status(sessions, key.id, KeyStatus.revoked)
    error = await refused(sessions, f"Bearer {raw}", KeyRevoked)
    assert_401(error, "key_revoked", "This API key has been revoked.")
    with pytest.raises(StatusChangeRefused):
        await set_status(sessions, key.id, KeyStatus.active)


@aio
async def test_paused_key_and_resume(sessions, auth_path):
    _, key, raw = await make_key(sessions)
    await set_status(sessions, key.id, KeyStatus.paused)
    error = await refused(sessions, f"Bearer {raw}", KeyDisabled)
    assert_401(error, "key_disabled", "This API key is paused. Resume it on API Keys in the App to use it again.")
    await set_status(sessions, key.id, KeyStatus.active)
    assert (await auth(sessions, f"Bearer {raw}")).key_id == key.id


@aio
async def test_suspended_account_covers_live_keys_but_not_revoked_ones(sessions, auth_path):
    user, key, raw = await make_key(sessions)
    _, revoked, revoked_raw = await make_key(sessions, key_name="old")
    await set_status(sessions, revoked.id, KeyStatus.revoked)
    await set_standing(sessions, user.name, Standing.suspended)
    assert_401(await refused(sessions, f"Bearer {raw}", AccountSuspended), "account_suspended", SUSPENDED)
    await set_status(sessions, key.id, KeyStatus.paused)
    await refused(sessions, f"Bearer {raw}", AccountSuspended)
    await refused(sessions, f"Bearer {revoked_raw}", KeyRevoked)
    await set_standing(sessions, user.name, Standing.active)
    await refused(sessions, f"Bearer {raw}", KeyDisabled)


@aio
async def test_recheck_sees_a_revoke_after_the_request_began(sessions):
    _, key, raw = await make_key(sessions)
    principal = await auth(sessions, f"Bearer {raw}")
    await set_status(sessions, key.id, KeyStatus.revoked)
    async with sessions() as session:
        with pytest.raises(RevokedKey):
            await keys.recheck(session, principal)


async def set_status(sessions, key_id, status):
    async with sessions() as session, session.begin():
        await keys.set_key_status(session, key_id, status)


async def set_standing(sessions, name, standing):
    async with sessions() as session, session.begin():
        await keys.set_standing(session, await keys.find_user(session, name), standing)


# Embedded start and the admin command ----------------------------------------
@aio
async def test_ensure_local_user_and_key_makes_them_once(db_url, sessions):
    raw = await admin.ensure_local_user_and_key(db_url)
    assert raw is not None and raw.startswith("sk-acs-")
    assert await admin.ensure_local_user_and_key(db_url) is None
    principal = await auth(sessions, f"Bearer {raw}")
    async with sessions() as session:
        user = await session.get(User, principal.user_id)
    assert (user.name, principal.key_name, user.role) == ("local", "local", Role.admin)


@aio
async def test_admin_commands(db_url, sessions, capsys):
    def admin_cli(*argv: str) -> tuple[int, str, str]:
        code = run_in_thread(admin.main, list(argv), admin.AdminConfig(database_url=db_url))
        out, err = capsys.readouterr()
        return code, out, err

    assert admin_cli("user", "create", "bob")[0] == 0
    code, raw, _ = admin_cli("key", "create", "--user", "bob", "--name", "ci")
    assert code == 0 and (await auth(sessions, f"Bearer {raw.strip()}")).key_name == "ci"
    code, listing, _ = admin_cli("key", "list", "--user", "bob")
    key_id = listing.splitlines()[1].split()[0]
    assert admin_cli("key", "pause", key_id)[0] == 0
    await refused(sessions, f"Bearer {raw.strip()}", KeyDisabled)
    code, _, err = admin_cli("key", "create", "--user", "bob", "--name", "z" * 40)
    assert code == 1 and "at most 32 characters" in err
    code, _, err = admin_cli("key", "create", "--user", "nobody", "--name", "x")
    assert code == 1 and "No user" in err
