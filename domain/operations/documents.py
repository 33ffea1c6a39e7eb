"""The JSON documents of the operations' results: what `--json` prints and the admin routes answer.

Ids are strings, times ISO 8601 in UTC (None stays null), tokens numbers, money USD numbers.
"""
from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

from ledger.tokens import analytics
from ledger.tokens import spend
from ledger.tokens import usage
from ledger.accounts.tables import User
from ledger.tokens.tables import SpendStopChange
from ledger.work.tables import Work
from domain.operations.api_keys import KeyPage
from domain.operations.background import WorkLine
from domain.operations.spend_page import SpendDays, SpendPage
from domain.operations.tokens import BudgetLeft
from domain.operations.usage_report import UsageReport
from domain.operations.users import Details, UserLine, UserPage
from domain.operations.warm_windows import ModelLine, WindowLine

Document = dict[str, Any]


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(timezone.utc).isoformat()


def clock_time(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def usd(amount: float) -> float:
    return round(amount, 2)


# Users ------------------------------------------------------------------------------------
def user_line(line: UserLine, now: datetime) -> Document:
    return {"id": str(line.user_id), "name": line.name, "role": line.role.value, "standing": line.standing.value,
            "monthly_allowance": line.monthly_allowance, "allowance_is_default": line.allowance_is_default,
            "created_at": iso(line.created_at), "tags": line.tags, **activity(line.activity, now),
            **user_details(line.details), "budget_left": line.budget_left, "api_keys": line.api_keys}


def user_details(details: Details) -> Document:
    """`organization`: the typed one, else the Application's; `deleted_at`: null unless an admin deleted the User."""
    return {"email": details.email, "organization": details.organization,
            "typed_organization": details.typed_organization,
            "application_organization": details.application_organization,
            "discord_handle": details.discord_handle, "deleted_at": iso(details.deleted_at)}


def activity(found: analytics.Activity, now: datetime) -> Document:
    return {"engagement": found.engagement(now).value, "last_completion_at": iso(found.last_completion_at),
            "active_weeks": found.active_weeks, "tokens_last_30_days": found.tokens_last_30_days,
            "models": found.models}


def account(found: usage.Account) -> Document:
    return {"id": str(found.user_id), "name": found.name, "standing": found.standing.value,
            "monthly_allowance": found.allowance, "allowance_is_default": found.allowance_is_default,
            "allowance_used": found.allowance_used, "allowance_left": found.allowance_left,
            "budget_left": found.budget_left, "tokens_this_month": found.tokens_this_month,
            "running_holds": found.running, "keys": [key_line(line) for line in found.keys]}


def user_page(page: UserPage, now: datetime) -> Document:
    """The account as `user show --json` prints it, with what the Users tab adds."""
    return {**account(page.account), "role": page.role.value, "created_at": iso(page.created_at),
            "tags": page.tags, **activity(page.activity, now), **user_details(page.details)}


def user_brief(user: User) -> Document:
    return {"id": str(user.id), "name": user.name, "role": user.role.value, "standing": user.standing.value}


# Keys and Budgets ---------------------------------------------------------------------------
def key_line(line: usage.KeyLine) -> Document:
    key = line.key
    return {"id": str(key.id), "user_id": str(key.user_id), "name": key.name, "prefix": key.prefix,
            "status": key.status.value, "tokens_this_month": line.tokens_this_month,
            "budget_left": line.budget_left, "created_at": iso(key.created_at),
            "last_used_at": iso(key.last_used_at)}


def key_lines(user: User, lines: list[usage.KeyLine]) -> Document:
    return {"user": {"id": str(user.id), "name": user.name}, "keys": [key_line(line) for line in lines]}


def key_page(page: KeyPage) -> Document:
    owner = page.owner
    return {"key": key_line(page.line), "user": {"id": str(owner.user_id), "name": owner.name,
                                                 "standing": owner.standing}}


def budget_left(left: BudgetLeft) -> Document:
    return {"user": {"id": str(left.user_id), "name": left.user_name},
            "key": None if left.key_id is None else {"id": str(left.key_id), "name": left.key_name},
            "budget_left": left.tokens}


# Usage and work -----------------------------------------------------------------------------
def usage_report(report: UsageReport) -> Document:
    return {"user": {"id": str(report.user_id), "name": report.user_name},
            "key": None if report.key_id is None else {"id": str(report.key_id), "name": report.key_name},
            "from": report.first.isoformat(), "to": report.last.isoformat(),
            "days": [{"day": day.day.isoformat(), **{name: getattr(day, name) for name in _DAY_COUNTS}}
                     for day in report.days],
            "total": report.total(), "running_holds": [running_hold(held) for held in report.running]}


_DAY_COUNTS = ("completions", "tokens", "completed", "failed", "stopped")


def running_hold(held: usage.RunningHold) -> Document:
    return {"id": str(held.hold_id), "started_at": iso(held.started), "key_name": held.key_name,
            "model": held.model, "source": held.source.value, "tokens": held.tokens}


def work_line(line: WorkLine) -> Document:
    row: Work = line.row
    progress = line.progress
    return {"id": str(row.id), "kind": row.kind.value, "user_id": str(row.user_id), "key_id": str(row.key_id),
            "model": row.model, "status": row.status.value, "attempts": row.attempts,
            "created_at": iso(row.created_at), "started_at": iso(row.started_at),
            "finished_at": iso(row.finished_at), "result_status": row.result_status,
            "progress": None if progress is None else {"prompts_done": progress[0], "n_prompts": progress[1]}}


# The spend and warm windows ---------------------------------------------------------------------
def spend_page(page: SpendPage) -> Document:
    stop = page.stop
    return {"locked": stop.locked, "reason": stop.reason or None, "changed_at": iso(stop.changed_at),
            "last_24h_usd": usd(page.last_24h_usd), "counted_since_clear_usd": usd(page.counted_since_clear_usd),
            "warn_usd": [usd(amount) for amount in page.warn_usd],
            "pause_usd": usd(page.pause_usd), "last_counted_at": iso(page.last_counted_at),
            "by_model": [model_spend(each) for each in page.by_model],
            "changes": [stop_change(change) for change in page.changes],
            "per_day": spend_days(page.per_day), "who_used": [model_user(each) for each in page.who_used]}


def spend_days(found: SpendDays) -> Document:
    """Every day, with each top model's spend and the others' as one (`other_usd`)."""
    return {**days_of(found.first, found.last), "models": found.models,
            "days": [{"day": day.isoformat(), "usd": {model: usd(spent.get(model, 0.0)) for model in found.models},
                      "other_usd": usd(found.others.get(day, 0.0))} for day, spent in found.days]}


def model_user(each: spend.ModelUser) -> Document:
    return {"model": each.model_id, "user_id": str(each.user_id), "email": each.email, "name": each.name,
            "completions": each.completions, "tokens": each.tokens, "usd": usd(each.usd)}


def model_spend(each: spend.ModelSpend) -> Document:
    return {"model": each.model_id, "usd": usd(each.usd), "gpu_hours": round(each.gpu_hours, 3)}


def stop_change(change: SpendStopChange) -> Document:
    return {"at": iso(change.at), "kind": change.kind.value, "by": change.by, "reason": change.reason or None,
            "usd": None if change.usd is None else usd(change.usd)}


def model_line(line: ModelLine) -> Document:
    return {"model": line.model_id, "floor": line.floor, "warm_now": line.warm_now,
            "replica_hour_usd": usd(line.replica_hour_usd), "next_7_days_usd": usd(line.next_7_days_usd)}


def window_line(line: WindowLine) -> Document:
    window = line.window
    shape: Document = (
        {"kind": "weekly", "days": [int(day) for day in window.days.split(",") if day],
         "from": clock_time(window.start_minute), "to": clock_time(window.end_minute),
         "time_zone": window.time_zone, "hours_per_week": round(line.hours, 2), "usd_per_week": usd(line.usd)}
        if line.weekly else
        {"kind": "warm_now", "starts_at": iso(window.starts_at or window.created_at), "ends_at": iso(window.ends_at),
         "hours": round(line.hours, 2), "usd": usd(line.usd)})
    return {"id": str(window.id), "model": window.model_id, **shape, "on_now": line.on_now,
            "next_7_days_usd": usd(line.next_7_days_usd), "created_by": window.created_by,
            "created_at": iso(window.created_at)}


def warm_tab(models: list[ModelLine], lines: list[WindowLine]) -> Document:
    """The Models tab: what GET /v1/admin/warm-windows answers and `warm list --json` prints."""
    return {"models": [model_line(line) for line in models], "windows": [window_line(line) for line in lines]}


# Analytics ---------------------------------------------------------------------------------------
def days_of(first: date, last: date) -> Document:
    return {"from": first.isoformat(), "to": last.isoformat()}


def user_numbers(numbers: analytics.UserNumbers) -> Document:
    return {"users": numbers.users, "new_users": numbers.new_users,
            "new_users_active_within_24h": numbers.new_users_active_within_24h,
            "active_last_7_days": numbers.active_last_7_days,
            "engagement": {kind.value: count for kind, count in numbers.engagement.items()},
            "new_users_per_day": [{"day": day.isoformat(), "new_users": n}
                                  for day, n in numbers.new_users_per_day.items()]}


def budget_numbers(numbers: analytics.BudgetNumbers) -> Document:
    return {"at_allowance": numbers.at_allowance, "near_allowance": numbers.near_allowance,
            "refused_requests": numbers.refused_requests,
            "closest": [{"user": {"id": str(line.user_id), "name": line.name}, "monthly_allowance": line.allowance,
                         "allowance_used": line.used, "share_used": round(line.share_used, 4),
                         "runs_out_on": None if line.runs_out_on is None else line.runs_out_on.isoformat()}
                        for line in numbers.closest]}


def share(each: analytics.Share) -> Document:
    return {"name": each.name, "completions": each.completions, "tokens": each.tokens}


def platform_numbers(numbers: analytics.PlatformNumbers) -> Document:
    return {"days": [{"day": d.day.isoformat(), "completed": d.completed, "failed": d.failed, "stopped": d.stopped}
                     for d in numbers.days],
            "by_source": [share(each) for each in numbers.by_source],
            "by_model": [share(each) for each in numbers.by_model],
            "spend_by_day": [{"day": day.isoformat(), "usd": usd(amount)}
                             for day, amount in numbers.spend_by_day.items()],
            "spend_by_model": [{"model": model, "usd": usd(amount)}
                               for model, amount in numbers.spend_by_model.items()]}


def usage_numbers(numbers: analytics.UsageNumbers) -> Document:
    return {"by_user": [share(each) for each in numbers.by_user],
            "by_model": [share(each) for each in numbers.by_model],
            "by_source": [share(each) for each in numbers.by_source],
            "newest_completions": [completion(line) for line in numbers.newest_completions],
            "newest_budget_changes": [budget_change(change) for change in numbers.newest_budget_changes]}


def completion(line: analytics.CompletionLine) -> Document:
    return {"id": str(line.hold_id), "started_at": iso(line.started_at), "user": line.user_name,
            "key_name": line.key_name, "model": line.model, "source": line.source.value, "tokens": line.tokens,
            "counted": line.counting, "duration_s": None if line.duration_s is None else round(line.duration_s, 3),
            "status": line.status.value}


def budget_change(change: analytics.BudgetChange) -> Document:
    return {"at": iso(change.at), "user": change.user_name, "key_name": change.key_name, "tokens": change.tokens,
            "note": change.note}
