"""Azure OpenAI's error bodies, for the simulator's Azure routes and its content-filter step.

Owns: the bodies Azure OpenAI answers with where they differ from OpenAI's — a missing
`api-version` (400), a missing or refused `api-key` (401 `Access denied ...`), its rate limit
(429 "Requests to the ... have exceeded call rate limit ... Please retry after N seconds")
and its prompt filter (400 `content_filter`, `innererror.code: ResponsibleAIPolicyViolation`,
`content_filter_result`) — and `AzureCall`, what an Azure route asked (operation, version).
Must not import: aiohttp or any I/O; pure functions of their arguments.
Sources: https://learn.microsoft.com/azure/ai-services/openai/reference,
https://learn.microsoft.com/azure/ai-services/openai/concepts/content-filter,
https://learn.microsoft.com/azure/ai-services/openai/quotas-limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ErrorBody = dict[str, dict[str, Any]]
"""An error envelope as a JSON-ready dict."""

OPERATIONS = {
    "chat/completions": "ChatCompletions_Create",
    "embeddings": "Embeddings_Create",
    "completions": "Completions_Create",
}
"""A deployment's route tail -> the operation name Azure quotes in its rate-limit message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AzureCall:
    """What an Azure route was asked.

    Attributes:
        operation: Azure's operation name (`ChatCompletions_Create`, `OPERATIONS`).
        api_version: the `api-version` query value as sent.
    """

    operation: str
    api_version: str


def missing_api_version_error() -> ErrorBody:
    """400 for a request without `?api-version=`."""
    return {
        "error": {
            "code": "BadRequest",
            "message": "The api-version query parameter (?api-version=) is required for all requests.",
        }
    }


def access_denied_error() -> ErrorBody:
    """401 for a missing, empty or revoked `api-key` (Azure's wording, code `"401"`)."""
    return {
        "error": {
            "code": "401",
            "message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
            "provide a valid key for an active subscription and use a correct regional API endpoint for "
            "your resource.",
        }
    }


def rate_limit_error(call: AzureCall, seconds: int) -> ErrorBody:
    """429 of a deployment's call rate limit, quoting the wait in whole seconds."""
    return {
        "error": {
            "code": "429",
            "message": f"Requests to the {call.operation} Operation under Azure OpenAI API version "
            f"{call.api_version} have exceeded call rate limit of your current OpenAI S0 pricing tier. "
            f"Please retry after {seconds} seconds. Please go here: https://aka.ms/oai/quotaincrease if "
            "you would like to further increase the default rate limit.",
        }
    }


def prompt_filter_error() -> ErrorBody:
    """400 of the content filter refusing a prompt (`cf400`)."""
    severity = {"filtered": False, "severity": "safe"}
    return {
        "error": {
            "message": "The response was filtered due to the prompt triggering Azure OpenAI's content "
            "management policy. Please modify your prompt and retry. To learn more about our content "
            "filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766",
            "type": None,
            "param": "prompt",
            "code": "content_filter",
            "status": 400,
            "innererror": {
                "code": "ResponsibleAIPolicyViolation",
                "content_filter_result": {
                    "hate": {"filtered": True, "severity": "high"},
                    "self_harm": severity,
                    "sexual": severity,
                    "violence": severity,
                },
            },
        }
    }
