"""The adapters held against the conformance corpus (tests/conformance/<provider>/).

Every fixture there comes from a primary source (the installed SDK's types, the
provider's reference, its public issue tracker), named in the file, and says what
the real service means by it. Here each goes through what aeval does with it: a
batch status through the adapter's status mapping, a result line through the
adapter's conversion and the one output-line parser, a documented limit against
the provider's shard limits. The status files also hold every value the SDK's
own type allows, so a status the SDK gains fails here until it has a meaning.
"""

from __future__ import annotations

import contextlib
import json
import typing
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from aeval.batch.providers.registry import provider_spec
from aeval.batch.retry import retryable_request
from aeval.config import Credentials
from aeval.scoring.responses import parse_batch_line

CORPUS = Path(__file__).parent / "conformance"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _doc(provider: str, name: str) -> dict[str, Any]:
    return json.loads((CORPUS / provider / f"{name}.json").read_text())


def _fixtures(name: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(CORPUS.glob(f"*/{name}.json")):
        for fixture in json.loads(path.read_text())["fixtures"]:
            out.append((path.parent.name, fixture))
    return out


def _literal(annotation: Any) -> set[str]:
    values: set[str] = set()
    for arg in typing.get_args(annotation):
        values |= {arg} if isinstance(arg, str) else _literal(arg)
    return values


def test_every_fixture_names_its_source() -> None:
    for path in CORPUS.glob("*/*.json"):
        assert json.loads(path.read_text()).get("source"), f"{path} names no source"


# -- statuses ----------------------------------------------------------------------------


def _sdk_statuses(provider: str) -> set[str]:
    if provider in ("openai", "groq", "azure"):
        import groq.types
        import openai.types

        model = groq.types.BatchRetrieveResponse if provider == "groq" else openai.types.Batch
        return _literal(model.model_fields["status"].annotation)
    if provider == "together":
        import together.types

        return _literal(together.types.BatchJob.model_fields["status"].annotation)
    if provider == "mistral":
        from mistralai.client import models

        return _literal(models.BatchJobStatus)
    if provider == "anthropic":
        from anthropic.types.messages import MessageBatch

        return _literal(MessageBatch.model_fields["processing_status"].annotation)
    from google.genai import types

    return {state.value for state in types.JobState}


@pytest.mark.parametrize(
    "provider", ["openai", "groq", "together", "mistral", "anthropic", "gemini", "azure"]
)
def test_the_corpus_has_every_status_the_sdk_allows(provider: str) -> None:
    fixtures = _doc(provider, "statuses")["fixtures"]
    assert {f["wire"] for f in fixtures} == _sdk_statuses(provider)


def _remote(provider: str, fixture: dict[str, Any]) -> Any:
    wire = fixture["wire"]
    creds = Credentials("k", "http://127.0.0.1:9")
    if provider == "xai":  # no status on the wire: counters and times (the fixture's batch)
        from aeval.batch.providers.xai_api import XaiBatch, to_remote

        now = datetime.fromisoformat(_doc("xai", "statuses")["now"]).timestamp()
        return to_remote(XaiBatch.model_validate(fixture["batch"]), now)
    if provider in ("openai", "groq", "azure"):
        import openai.types

        from aeval.batch.providers.stainless import openai_shaped_batch

        batch = openai.types.Batch.construct(
            id="b", status=wire, created_at=0, completion_window="24h",
            endpoint="/v1/chat/completions", input_file_id="f", object="batch",
        )  # fmt: skip
        return openai_shaped_batch(batch)
    if provider == "together":
        import together.types

        from aeval.batch.providers.together_api import TogetherBatchProvider

        job = together.types.BatchJob.construct(id="b", status=wire, progress=0.0, created_at=NOW)
        return TogetherBatchProvider(creds)._to_remote(job)
    if provider == "mistral":
        from mistralai.client import models

        from aeval.batch.providers.mistral_api import _to_remote

        job = models.BatchJob.model_construct(
            id="b", status=wire, metadata={}, errors=[], succeeded_requests=0,
            failed_requests=0, total_requests=0, created_at=0,
        )  # fmt: skip
        return _to_remote(job)
    if provider == "anthropic":
        from anthropic.types.messages import MessageBatch, MessageBatchRequestCounts

        from aeval.batch.providers.anthropic_api import _to_remote

        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        counts.update(fixture.get("counts", {}))
        batch = MessageBatch.construct(
            id="b", processing_status=wire, created_at=NOW, expires_at=NOW,
            request_counts=MessageBatchRequestCounts.construct(**counts),
            cancel_initiated_at=NOW if fixture.get("cancel") else None,
        )  # fmt: skip
        return _to_remote(batch)
    from google.genai import types

    from aeval.batch.providers.gemini_api import GeminiBatchProvider

    job = types.BatchJob(name="batches/b", state=types.JobState(wire), create_time=NOW)
    return GeminiBatchProvider(creds)._to_remote(job)


@pytest.mark.parametrize(
    ("provider", "fixture"),
    _fixtures("statuses"),
    ids=lambda v: v if isinstance(v, str) else v["wire"],
)
def test_a_status_means_what_the_provider_means(provider: str, fixture: dict[str, Any]) -> None:
    remote = _remote(provider, fixture)
    means = fixture["means"]
    assert (remote.status, remote.terminal) == (means["status"], means["terminal"])
    if "completed" in means:
        assert remote.completed == means["completed"]
    if "failed" in means:
        assert remote.failed == means["failed"]
    if "output" in means:  # what an ended batch finished is read back
        assert (remote.output_file_id is not None) is means["output"]
    if "error" in means:
        assert [e.message for e in remote.errors] == [means["error"]]
    if "created_at" in means:
        assert remote.created_at == means["created_at"]


# -- per-request results ---------------------------------------------------------------


def _output_line(provider: str, line: dict[str, Any]) -> str | None:
    if provider == "gemini":  # None: the adapter passes no line on
        from aeval.batch.providers.gemini_api import _converted

        return _converted(line)
    if provider == "anthropic":
        from aeval.batch.providers.anthropic_api import result_line

        return result_line(json.dumps(line), None, "b")
    if provider == "xai":
        from aeval.batch.providers.xai_api import _Result
        from aeval.batch.providers.xai_api import result_line as xai_line

        return xai_line(_Result.model_validate(line))
    if provider == "azure":  # a prompt Azure filtered is read as the model's refusal
        from aeval.batch.providers.azure_api import filtered_line

        return filtered_line(json.dumps(line))
    return json.dumps(line)  # OpenAI-shaped lines, read as they come


@pytest.mark.parametrize(
    ("provider", "fixture"),
    _fixtures("results"),
    ids=lambda v: v if isinstance(v, str) else v["name"],
)
def test_a_result_means_what_the_provider_means(provider: str, fixture: dict[str, Any]) -> None:
    means = fixture["means"]
    line = _output_line(provider, fixture["line"])
    if means["row"] is None:  # nothing says which request it answers: no line, no row
        assert line is None
        return
    assert line is not None
    response = parse_batch_line(line)
    assert (response.custom_id or None) == means["row"]
    assert response.content == means["answer"]
    if means["error_code"] is not None:
        assert response.error_code == means["error_code"]
    if means["retryable"] is not None:
        assert response.is_error
        assert retryable_request(response.error_code, response.status_code) is means["retryable"]
    else:
        assert not response.is_error
    if "status_code" in means:  # the HTTP status the provider's error code stands for
        assert response.status_code == means["status_code"]
    if means["finish_reason"] is not None:
        assert response.finish_reason == means["finish_reason"]
    if means["completion_tokens"] is not None:
        assert response.completion_tokens == means["completion_tokens"]
    if "prompt_tokens" in means:
        assert response.prompt_tokens == means["prompt_tokens"]
    if "filter" in means:  # Azure's content-filter results, kept
        kept = json.loads(line)["response"]["body"]["prompt_filter_results"]
        assert kept[0]["content_filter_results"] == means["filter"]
    if "model" in means:  # the model version the provider named, kept
        assert json.loads(line)["response"]["body"]["model"] == means["model"]


def test_the_gemini_corpus_has_every_google_rpc_code() -> None:
    # google/rpc/code.proto's Code: OK (0) to UNAUTHENTICATED (16), each with its source
    errors = [f for f in _doc("gemini", "results")["fixtures"] if "error" in f["line"]]
    assert sorted(f["line"]["error"].get("code", 0) for f in errors) == list(range(17))
    assert all("code.proto" in f["source"] and "status_code" in f["means"] for f in errors)


def _sdk_finish_reasons(provider: str) -> set[str]:
    """Every stop reason the provider's SDK types allow on a result."""
    if provider in ("openai", "groq", "together"):
        choice = __import__(f"{provider}.types.chat.chat_completion", fromlist=["Choice"]).Choice
        return _literal(choice.model_fields["finish_reason"].annotation)
    if provider == "mistral":
        from mistralai.client import models

        return _literal(models.ChatCompletionChoiceFinishReason)
    if provider == "anthropic":
        from anthropic.types import Message

        return _literal(Message.model_fields["stop_reason"].annotation)
    from google.genai import types

    return {reason.value for reason in types.FinishReason}


def _raw_finish_reason(provider: str, line: dict[str, Any]) -> str | None:
    """The stop reason as the provider wrote it in a result line (None: an error line)."""
    try:
        if provider == "anthropic":
            return str(line["result"]["message"]["stop_reason"])
        if provider == "gemini":
            return str(line["response"]["candidates"][0]["finishReason"])
        return str(line["response"]["body"]["choices"][0]["finish_reason"])
    except (KeyError, IndexError, TypeError):
        return None


@pytest.mark.parametrize(
    "provider", ["openai", "groq", "together", "mistral", "anthropic", "gemini"]
)
def test_the_corpus_has_every_stop_reason_the_sdk_allows(provider: str) -> None:
    """A stop reason the SDK gains fails here until a fixture says what it means."""
    seen = {_raw_finish_reason(provider, f["line"]) for f in _doc(provider, "results")["fixtures"]}
    missing = _sdk_finish_reasons(provider) - seen
    assert not missing, f"{provider}: no result fixture for stop reasons {sorted(missing)}"


def test_every_gemini_finish_reason_has_a_meaning_and_only_filters_are_filters() -> None:
    # google-genai's FinishReason docstrings: only the safety, policy, recitation and
    # blocklist reasons withhold an answer as a filter; the others say something else.
    from google.genai import types

    from aeval.batch.providers.gemini_api import FINISH_REASONS, finish_reason

    # Every reason the installed SDK can return has a meaning; the table may also know
    # reasons a later SDK added (at the floor, google-genai 3.0 lacks MODEL_ARMOR and others).
    assert {reason.value for reason in types.FinishReason} <= set(FINISH_REASONS)
    filters = {r for r, meant in FINISH_REASONS.items() if meant == "content_filter"}
    for reason in ("OTHER", "MALFORMED_FUNCTION_CALL", "LANGUAGE", "UNEXPECTED_TOOL_CALL",
                   "FINISH_REASON_UNSPECIFIED"):  # fmt: skip
        assert reason not in filters
        assert finish_reason(reason) == reason.lower().removeprefix("finish_reason_")
    assert finish_reason("A_REASON_FROM_LATER") == "a_reason_from_later"


# -- limits ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "name"),
    [("openai", "openai"), ("groq", "groq"), ("together", "together"),
     ("anthropic", "anthropic"), ("gemini", "google"), ("mistral", "mistral"),
     ("xai", "xai"), ("azure", "azure")],
)  # fmt: skip
def test_a_shard_stays_within_the_documented_limits(provider: str, name: str) -> None:
    documented = _doc(provider, "limits")
    limits = provider_spec(name).limits
    if "max_requests" in documented:
        assert limits.max_requests <= documented["max_requests"]
    assert limits.max_bytes <= documented["max_bytes"]


# -- the lost-create lookup's listing ----------------------------------------------------


@contextlib.contextmanager
def _serving(routes: list[Any]) -> Iterator[str]:
    """A Starlette app on a loopback port in a thread: its base URL while the block runs."""
    import uvicorn
    from starlette.applications import Starlette

    from aeval.uvicorn_thread import UvicornThread, listening_socket

    sock, url = listening_socket("127.0.0.1", 0)
    server = UvicornThread("the listing", "listing", 10.0)
    server.start(
        uvicorn.Config(Starlette(routes=routes), log_level="warning", lifespan="off"), sock
    )
    try:
        yield url
    finally:
        server.stop()


async def _found(adapter: Any, tag: Any) -> str | None:
    """The id of the batch the adapter's lost-create lookup finds for ``tag`` (None:
    none); the adapter is closed after."""
    try:
        found = await adapter.find(tag)
    finally:
        await adapter.aclose()
    return found.id if found is not None else None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "fixture", _doc("together", "listing")["fixtures"], ids=lambda f: f["name"]
)
async def test_together_lookup_reads_the_listing_as_together_means_it(
    fixture: dict[str, Any],
) -> None:
    # The listing is served over HTTP exactly as the fixture has it, read by the SDK.
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from aeval.batch.providers.base import BatchTag
    from aeval.batch.providers.together_api import TogetherBatchProvider

    async def listing(request: Any) -> JSONResponse:
        return JSONResponse(fixture["listing"])

    tag_doc = fixture["tag"]
    tag = BatchTag(
        run_id="run", shard="together/m|t1|s0", attempt=0, requests=3,
        intent_at=datetime.fromisoformat(tag_doc["intent_at"]).timestamp(),
        claimed=frozenset(tag_doc["claimed"]), input_file_id=tag_doc["input_file_id"],
    )  # fmt: skip
    with _serving([Route("/v1/batches", listing)]) as url:
        found = await _found(TogetherBatchProvider(Credentials("k", url)), tag)
    assert found == fixture["means"]["found"]


def _cursor_page(pages: list[list[Any]], request: Any, cursor: str) -> dict[str, Any]:
    """The page after the one whose last id the request's ``cursor`` parameter names
    (the first without it), with the Stainless SDKs' paging fields. After the last
    page the listing is empty, as a cursor past the end reads: openai before 1.62
    does not read ``has_more`` and asks once more (openai/pagination.py, 1.40.0)."""
    after = request.query_params.get(cursor)
    at = 0 if after is None else [p[-1]["id"] for p in pages].index(after) + 1
    if at == len(pages):
        return {"data": [], "has_more": False, "first_id": None, "last_id": None}
    page = pages[at]
    return {
        "data": page, "has_more": at < len(pages) - 1,
        "first_id": page[0]["id"], "last_id": page[-1]["id"],
    }  # fmt: skip


def _listing_routes(provider: str, doc: dict[str, Any], pages: list[list[Any]]) -> list[Any]:
    """The provider's listing route, paging as its SDK and reference say (the fixture
    file's ``paging``), serving the fixture's pages as they are."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def openai_list(request: Any) -> JSONResponse:  # cursor: after = last id
        return JSONResponse({"object": "list", **_cursor_page(pages, request, "after")})

    async def groq_list(request: Any) -> JSONResponse:  # one page: no paging parameters
        assert len(pages) == 1
        return JSONResponse({"object": "list", "data": pages[0]})

    async def mistral_list(request: Any) -> JSONResponse:  # page from 0, page_size
        at = int(request.query_params.get("page", "0"))
        assert int(request.query_params["page_size"]) == doc["page_size"]
        total = sum(len(p) for p in pages)
        data = pages[at] if at < len(pages) else []
        return JSONResponse({"object": "list", "data": data, "total": total})

    async def gemini_list(request: Any) -> JSONResponse:  # pageToken = nextPageToken
        at = int(request.query_params.get("pageToken", "0"))
        body: dict[str, Any] = {"operations": pages[at]}
        if at < len(pages) - 1:
            body["nextPageToken"] = str(at + 1)
        return JSONResponse(body)

    async def gemini_get(request: Any) -> JSONResponse:
        name = f"batches/{request.path_params['batch']}"
        [op] = [op for page in pages for op in page if op["name"] == name]
        return JSONResponse(op)

    if provider == "openai":
        return [Route("/v1/batches", openai_list)]
    if provider == "groq":
        return [Route("/openai/v1/batches", groq_list)]
    if provider == "mistral":
        return [Route("/v1/batch/jobs", mistral_list)]
    # google-genai 3.x's default API version is v1 (_api_client.GOOGLE_AI_API_DEFAULT_VERSION)
    return [Route("/v1/batches", gemini_list), Route("/v1/batches/{batch}", gemini_get)]


def _listing_adapter(provider: str, url: str) -> Any:
    if provider == "openai":
        from aeval.batch.providers.openai_api import OpenAIBatchProvider

        return OpenAIBatchProvider(Credentials("k", f"{url}/v1"))
    if provider == "groq":
        from aeval.batch.providers.groq_api import GroqBatchProvider

        return GroqBatchProvider(Credentials("k", url))
    if provider == "mistral":
        from aeval.batch.providers.mistral_api import MistralBatchProvider

        return MistralBatchProvider(Credentials("k", url))
    from aeval.batch.providers.gemini_api import GeminiBatchProvider

    return GeminiBatchProvider(Credentials("k", url))


_LABELLED = ("openai", "groq", "mistral", "gemini")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "fixture"),
    [(p, f) for p in _LABELLED for f in _doc(p, "listing")["fixtures"]],
    ids=lambda v: v if isinstance(v, str) else v["name"],
)
async def test_a_labelled_lookup_reads_the_listing_as_the_provider_means_it(
    provider: str, fixture: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lost create is found by the labels aeval put on the batch (metadata, or Gemini's
    # display name), across every page of the listing, served as the fixture has it and
    # read by the provider's own SDK.
    from aeval.batch.providers import mistral_api
    from aeval.batch.providers.base import BatchTag

    doc = _doc(provider, "listing")
    if "page_size" in doc:  # a few batches make a full page: paging is exercised
        monkeypatch.setattr(mistral_api, "_PAGE", doc["page_size"])
    t = fixture["tag"]
    tag = BatchTag(
        run_id=t["run_id"], shard=t["shard"], attempt=t["attempt"], requests=3,
        claimed=frozenset(t["claimed"]),
    )  # fmt: skip
    if "display_name" in t:  # the label as the fixture's batches carry it
        assert tag.display_name == t["display_name"]
    with _serving(_listing_routes(provider, doc, fixture["pages"])) as url:
        found = await _found(_listing_adapter(provider, url), tag)
    assert found == fixture["means"]["found"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "fixture", _doc("anthropic", "listing")["fixtures"], ids=lambda f: f["name"]
)
async def test_anthropic_lookup_reads_the_listing_as_anthropic_means_it(
    fixture: dict[str, Any],
) -> None:
    # A Message Batch carries no label: the lookup reads the newest-first listing for
    # the batch of the shard's size closest to the intent, and stops at the window's start.
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from aeval.batch.providers.anthropic_api import AnthropicBatchProvider
    from aeval.batch.providers.base import BatchTag

    pages = fixture["pages"]
    read: list[str | None] = []

    async def listing(request: Any) -> JSONResponse:  # after_id = the previous last id
        read.append(request.query_params.get("after_id"))
        return JSONResponse(_cursor_page(pages, request, "after_id"))

    t = fixture["tag"]
    intent = t["intent_at"]
    tag = BatchTag(
        run_id="run", shard=t["shard"], attempt=0, requests=t["requests"],
        intent_at=None if intent is None else datetime.fromisoformat(intent).timestamp(),
        claimed=frozenset(t["claimed"]),
    )  # fmt: skip
    with _serving([Route("/v1/messages/batches", listing)]) as url:
        found = await _found(AnthropicBatchProvider(Credentials("k", url)), tag)
    assert found == fixture["means"]["found"]
    assert len(read) == fixture["means"]["pages_read"]


def test_together_custom_ids_stay_within_the_documented_length(tmp_path: Path) -> None:
    from aeval.batch.providers.together_api import _write_upload
    from aeval.errors import ApiError

    most = _doc("together", "limits")["custom_id_max_chars"]
    source = tmp_path / "shard.jsonl"
    for n, ok in ((most, True), (most + 1, False)):
        line = {"custom_id": "x" * n, "method": "POST", "url": "/v1/chat/completions", "body": {}}
        source.write_text(json.dumps(line) + "\n")
        dest = tmp_path / "upload.jsonl"
        if ok:
            _write_upload(source, dest)
            assert json.loads(dest.read_text())["custom_id"] == "x" * n
            assert (
                dest.read_bytes()
                != (json.dumps({"custom_id": "x" * n, "body": {}}) + "\n").encode()
            )
        else:
            with pytest.raises(ApiError, match="at most 64"):
                _write_upload(source, dest)


# -- the Responses API (--endpoint responses) --------------------------------------------

_RESPONSES = _doc("openai", "responses")["fixtures"]


@pytest.mark.parametrize("fixture", _RESPONSES, ids=lambda f: f["name"])
def test_a_responses_result_means_what_openai_means(fixture: dict[str, Any]) -> None:
    """A Responses API output line, read as the SDK's Response type defines it: its body
    validates as ``Response`` (openai 3.57), the answer is ``Response.output_text``,
    reasoning tokens are ``usage.output_tokens_details.reasoning_tokens``."""
    from openai.types.responses import Response
    from openai.types.responses.response import IncompleteDetails

    means, line = fixture["means"], fixture["line"]
    body = (line.get("response") or {}).get("body") or {}
    status, reason = body.get("status"), (body.get("incomplete_details") or {}).get("reason")
    known = _literal(Response.model_fields["status"].annotation) | {None}
    known |= _literal(IncompleteDetails.model_fields["reason"].annotation)
    # A status or reason newer than the installed SDK (the floors run: openai 1.67 has
    # neither queued nor steered) is read all the same; the SDK validates the rest.
    if body.get("object") == "response" and {status, reason} <= known:
        assert (Response.model_validate(body).output_text or None) == means["answer"]
    response = parse_batch_line(json.dumps(line))
    assert response.custom_id == means["row"]
    assert response.content == means["answer"]
    assert response.finish_reason == means["finish_reason"]
    assert response.completion_tokens == means["completion_tokens"]
    assert response.reasoning_tokens == means["reasoning_tokens"]
    assert response.error_code == means["error_code"]
    if means["retryable"] is not None:
        assert retryable_request(response.error_code, response.status_code) is means["retryable"]


def test_the_responses_corpus_has_every_status_and_incomplete_reason_the_sdk_allows() -> None:
    """A status or incomplete reason the SDK gains fails here until a fixture says what it
    means."""
    from openai.types.responses import Response
    from openai.types.responses.response import IncompleteDetails

    bodies = [(f["line"].get("response") or {}).get("body") or {} for f in _RESPONSES]
    statuses = {b.get("status") for b in bodies}
    reasons = {(b.get("incomplete_details") or {}).get("reason") for b in bodies}
    missing = _literal(Response.model_fields["status"].annotation) - statuses
    missing |= _literal(IncompleteDetails.model_fields["reason"].annotation) - reasons
    assert not missing, f"no Responses fixture for {sorted(missing)}"


def test_a_responses_request_body_is_what_the_sdk_takes() -> None:
    """Every field of a /v1/responses body is one ``ResponseCreateParams`` defines (openai
    3.57 types/responses/response_create_params.py), with a value it accepts: validating
    the body through the SDK's own type leaves it as it is (a field the type does not
    have would be dropped, a wrong value refused)."""
    from openai.types.responses.response_create_params import (
        ResponseCreateParamsNonStreaming,
    )
    from pydantic import TypeAdapter

    from aeval.prompts import GenerationSettings, PromptSettings, responses_body

    sdk = TypeAdapter(ResponseCreateParamsNonStreaming)
    gen = GenerationSettings(max_completion_tokens=8192, reasoning_effort="high", top_p=0.9)
    body = responses_body("gpt-5-2025-08-07", "N=12?", PromptSettings(system="Be exact."), gen)
    assert sdk.validate_python(body) == body
    assert body["reasoning"] == {"effort": "high"} and body["max_output_tokens"] == 8192
    assert body["instructions"] == "Be exact." and "messages" not in body
    assert sdk.validate_python({**body, "seed": 1}) == body  # what a stray field would do
    plain = responses_body("o4-mini", "N=12?")
    assert sdk.validate_python(plain) == plain and set(plain) == {"model", "input"}


def test_a_responses_batch_is_a_batch_api_endpoint() -> None:
    """OpenAI's Batch API takes /v1/responses (openai 3.57 types/batch_create_params.py),
    the url aeval's request lines name for it."""
    from openai.types import batch_create_params

    from aeval.batch.shard import RESPONSES_URL

    hints = typing.get_type_hints(batch_create_params.BatchCreateParams, include_extras=True)
    assert RESPONSES_URL in _literal(hints["endpoint"])
