"""Admin route of an org's spend ledger: `GET .../spend?period=day|month&at=…` (SPEC §10)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from turnout.core.spend import PERIODS
from turnout.state.errors import StateUnavailable
from turnout.state.spend_store import SpendLedger
from turnout.tenancy.admin import AdminError
from turnout_ingress.admin.access import ok, unavailable
from turnout_ingress.admin.deps import ORG, Doc, now
from turnout_ingress.admin.time_query import parse_time, refuse_unknown

router = APIRouter()


def spend_ledger(request: Request) -> SpendLedger:
    """The ingress's spend ledger."""
    ledger: SpendLedger = request.app.state.turnout.obs.spend
    return ledger


@router.get(ORG + "/spend")
async def get_spend(
    request: Request,
    org: str,
    _: Doc,
    ledger: Annotated[SpendLedger, Depends(spend_ledger)],
) -> Response:
    """The org's spend in the `period` (`day` or `month`) holding `at` (default: now).

    The org's document is read first: another org's spend answers 404, as a missing org's.
    """
    refuse_unknown(request.query_params, ("period", "at"))
    period = request.query_params.get("period", "month")
    if period not in PERIODS:
        raise AdminError(400, "`period` must be `day` or `month`.", code="invalid_value", param="period")
    at_s = parse_time(request.query_params.get("at"), "at")
    try:
        spent = await ledger.read(org, period, now() if at_s is None else at_s)
    except StateUnavailable as exc:
        raise unavailable() from exc
    return ok({"spend": spent})
