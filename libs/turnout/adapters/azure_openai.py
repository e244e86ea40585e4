"""The Azure OpenAI API family (`azure_openai`): OpenAI's wire format at a deployment's URL.

Owns: the request for one target (`POST {base_url}/openai/deployments/{deployment}{path}
?api-version={api_version}` with the key in `api-key`, never a Bearer token; the target's
model is the deployment name) for chat completions, embeddings and legacy completions, and
the reading of a complete answer whose every choice the service's content filter ended
(`finish_reason: content_filter`, `filtered_outcome`). Everything else is the OpenAI
family's (`turnout.adapters.openai_chat`): the body as the client sent it, the error
envelope, the stream format (the same `chat.completion.chunk` events and `data: [DONE]`).
Must not import: `turnout.adapters.exchange`, services, FastAPI, arq.

The body keeps its `model` field (the deployment name): the service takes the deployment
from the URL and ignores the field, as its reference says of the deployment-based routes.

Azure's content filter answers a filtered prompt with HTTP 400, `error.code:
"content_filter"` (with `innererror.code: "ResponsibleAIPolicyViolation"` and
`content_filter_result`), which the core classifies as CONTENT_POLICY already
(`turnout.core.classify`); a filtered completion is a 200 whose choices end with
`finish_reason: "content_filter"`, read here as the same failure (a 2xx error envelope of
code `content_filter`), so the loop treats both alike: not retried, `content_policy_fallbacks`
tried when configured. A stream is relayed once its first content arrives, so a streamed
completion the filter ends later reaches the client as sent (its last chunk's
`finish_reason: content_filter`).

Wire format: https://learn.microsoft.com/azure/ai-services/openai/reference (routes,
`api-version`, `api-key`), https://learn.microsoft.com/azure/ai-services/openai/concepts/content-filter
(the filter's 400 and `finish_reason`), https://learn.microsoft.com/azure/ai-services/openai/quotas-limits
(429 with `Retry-After` / `retry-after-ms`, read by `turnout.core.hints`).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

import httpx
import msgspec

from turnout.adapters.base import AttemptResult, CallSpec
from turnout.adapters.openai_chat import OpenAIChat, outcome_of_response
from turnout.adapters.openai_operations import outcome_of_completion, outcome_of_embeddings
from turnout.adapters.prepared import post_request
from turnout.adapters.translated import FILTERED, content_policy_failure

_decode = msgspec.json.Decoder()
FILTERED_MESSAGE: Final = (
    "The response was filtered by the provider's content management policy (finish_reason content_filter)."
)
"""The message of a filtered completion's outcome (the provider sends none)."""


def deployment_path(deployment: str, operation_path: str, api_version: str) -> str:
    """The endpoint of one deployment's operation under the resource's `base_url` (pure).

    Args:
        deployment: the deployment name (the offer's `model`); percent-encoded except for
            the characters a URL path keeps (`A-Z a-z 0-9 - . _ ~`).
        operation_path: `/chat/completions`, `/embeddings` or `/completions`.
        api_version: the `api-version` query value (`2024-10-21`; checked by the config).

    Returns:
        `/openai/deployments/{deployment}{operation_path}?api-version={api_version}`.
    """
    return f"/openai/deployments/{quote(deployment, safe='')}{operation_path}?api-version={quote(api_version, safe='')}"


def filtered_outcome(result: AttemptResult) -> AttemptResult:
    """`result` (a read 2xx answer with a `choices` list), or a content-policy failure when
    the content filter ended every choice (`finish_reason: content_filter`; pure).

    The failure is a 2xx error envelope (`error_in_body`) of code `content_filter` and type
    `invalid_request_error`, which `turnout.core.classify` reads as CONTENT_POLICY; the
    usage the provider counted is kept. An answer with no choice, or one choice that ended
    otherwise, is returned as is.
    """
    if result.body is None:
        return result
    try:
        data: Any = _decode.decode(result.body)
    except msgspec.DecodeError:
        return result
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        return result
    if not all(isinstance(c, dict) and c.get("finish_reason") == FILTERED for c in choices):
        return result
    return content_policy_failure(result.outcome.status, FILTERED_MESSAGE, result.usage)


class AzureChat(OpenAIChat):
    """The `ApiFamily` of Azure OpenAI chat completions: OpenAI's (`OpenAIChat`) at a
    deployment's URL with an `api-key` header; a filtered completion is a failure."""

    def build_request(self, client: httpx.AsyncClient, spec: CallSpec, *, stream: bool) -> httpx.Request:
        """`POST {base_url}/openai/deployments/{spec.target.model}{path}?api-version=...` with
        `spec.body` as is; see `ApiFamily`.

        The key goes in `api-key` (never `authorization`; never logged or echoed); the client's
        passed headers (`CallSpec.passed`) as sent; Turnout's request id in `x-request-id`. `spec.api_version` is set for every `azure_openai`
        provider (the config requires it).
        """
        headers = [("api-key", spec.api_key), ("content-type", "application/json"), *spec.passed]
        if stream:
            headers.append(("accept", "text/event-stream"))
        headers.append(("x-request-id", spec.request_id))
        path = deployment_path(spec.target.model, self.path, spec.api_version or "")
        return post_request(client, spec.base_url, path, headers, spec.body)

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """OpenAI's reading (`outcome_of_response`), then `filtered_outcome`."""
        return filtered_outcome(outcome_of_response(status, headers, content, now_epoch_s))


class AzureEmbeddings(AzureChat):
    """`POST .../openai/deployments/{deployment}/embeddings` (never streamed); read as OpenAI's."""

    path = "/embeddings"

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """See `turnout.adapters.openai_operations.outcome_of_embeddings`."""
        return outcome_of_embeddings(status, headers, content, now_epoch_s)


class AzureCompletions(AzureChat):
    """`POST .../openai/deployments/{deployment}/completions`, the legacy text completions;
    read as OpenAI's, a filtered completion a failure (`filtered_outcome`)."""

    path = "/completions"

    def read_outcome(
        self, status: int, headers: httpx.Headers, content: bytes, now_epoch_s: float, *, native: bool = False
    ) -> AttemptResult:
        """`turnout.adapters.openai_operations.outcome_of_completion`, then `filtered_outcome`."""
        return filtered_outcome(outcome_of_completion(status, headers, content, now_epoch_s))


AZURE_CHAT: Final = AzureChat()
"""The family of `azure_openai` providers (chat completions)."""
AZURE_EMBEDDINGS: Final = AzureEmbeddings()
"""Embeddings on `azure_openai` providers."""
AZURE_COMPLETIONS: Final = AzureCompletions()
"""Legacy completions on `azure_openai` providers."""
