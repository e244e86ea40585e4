"""The pre-flight check of a request: its plan and health view, or why it cannot be served.

Owns: `check_plan`, which the front door runs before admitting a request against its
limits, so that a request the fleet cannot serve (an unknown model, preferences that leave
no offer, every target out of rotation) costs no quota and no queue slot.
Must not import: `turnout_ingress.app`, `turnout_ingress.serving.front_door`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnout.catalog import Catalog
from turnout.core.model_types import Operation, mismatch_message, serves
from turnout.core.plan import NoMatchingOffer, Plan, UnknownModel
from turnout.core.preferences import Preferences
from turnout.core.verdict import client_retry_after_s
from turnout.errors import GatewayUnavailable, RequestRejected
from turnout.health import HealthView
from turnout.tenancy.identity import Identity

if TYPE_CHECKING:
    from turnout_ingress.state import IngressState


async def check_plan(
    state: IngressState,
    model: str,
    identity: Identity,
    preferences: Preferences = Preferences(),
    catalog: Catalog | None = None,
    operation: Operation = "chat",
) -> tuple[Plan, HealthView]:
    """The request's plan and health view (one Redis round trip).

    Args:
        state: the ingress's shared objects (its router plans).
        model: the model the client asked for.
        identity: the caller (settings, policy, org).
        preferences: the request's `provider` object (SPEC §10).
        catalog: the request's snapshot (default: the one in force).
        operation: the call the request asks for; the model's type must serve it
            (`turnout.core.model_types.serves`).

    Raises:
        RequestRejected: 404 `model_not_found` for an unknown model; 400
            `no_matching_offer` for preferences that leave no offer; 400
            `wrong_model_type` for a model whose type does not serve `operation`
            (an embedding model asked to chat, a chat model asked for embeddings).
        GatewayUnavailable: 503 `circuit_open` when every target of the plan is OPEN
            (SPEC §5), with a jittered Retry-After (s); its message says when the
            request's own preferences narrowed the plan.
    """
    try:
        plan, view = await state.router.plan(
            model, identity.settings, identity.policy, identity.org, preferences, catalog=catalog
        )
    except UnknownModel as exc:
        raise RequestRejected(404, str(exc), code="model_not_found", param="model") from exc
    except NoMatchingOffer as exc:
        raise RequestRejected(400, str(exc), code="no_matching_offer", param="provider") from exc
    model_type = (catalog or state.catalog).type_of(model)
    if not serves(model_type, operation):  # a known model (planned): its type is the catalog's
        raise RequestRejected(
            400, mismatch_message(model, model_type, operation), code="wrong_model_type", param="model"
        )
    wait_s = view.unavailable_for([e.target.key for e in plan.entries])
    if wait_s is not None:
        retry_after = client_retry_after_s(wait_s, state.rng.random())
        left_out = _left_out_by_preferences(state, model, identity, preferences, catalog)
        allowed = " that the request's `provider` preferences allow" if left_out else ""
        raise GatewayUnavailable(
            f"Every provider of `{model}`{allowed} is temporarily out of rotation; retry after {retry_after} s."
            + (f" The preferences left out {_some(left_out)}: without them, those may serve it." if left_out else ""),
            retry_after_s=retry_after,
            code="circuit_open",
        )
    return plan, view


def _left_out_by_preferences(
    state: IngressState, model: str, identity: Identity, preferences: Preferences, catalog: Catalog | None
) -> list[str]:
    """The targets (`provider/model`) a request for `model` could use without its `provider`
    preferences and cannot with them, in plan order; none when the preferences only reorder."""
    if not preferences.narrows:
        return []
    kept = set(state.router.listed_targets(model, identity.settings, identity.policy, preferences, catalog))
    every = state.router.listed_targets(model, identity.settings, identity.policy, catalog=catalog)
    return [t for t in dict.fromkeys(every) if t not in kept]


def _some(targets: list[str], shown: int = 3) -> str:
    """`a/x`, `b/y` and 2 more: the first `shown` targets named, the rest counted."""
    named = ", ".join(f"`{t}`" for t in targets[:shown])
    return named + (f" and {len(targets) - shown} more" if len(targets) > shown else "")
