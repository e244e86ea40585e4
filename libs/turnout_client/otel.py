"""OpenTelemetry: put each routing event on the caller's current span.

Owns: `span_hook`, a routing callback. Needs `opentelemetry-api` (imported
when the hook is first called, so the package works without it).
Must not import: `turnout` or any service package.
"""

from __future__ import annotations

from turnout_client.routing import GatewayRouting

EVENT_NAME = "turnout.routing"


def span_hook(event: GatewayRouting) -> None:
    """Add `event` to the current span: one span event per answer, and the
    `turnout.*` attributes of the latest answer (a later model of the chain
    overwrites an earlier one's). Does nothing when no span is recording.

    Raises:
        ImportError: `opentelemetry-api` is not installed.
    """
    from opentelemetry import trace

    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes = event.as_attributes()
    span.add_event(EVENT_NAME, attributes)
    span.set_attributes(attributes)
