"""The HTTP surface through the SDK (and raw HTTP for the JSON a curl user sees)."""

from __future__ import annotations

import httpx
import openai
import polars as pl
import pytest
from openai.types import Batch, FileObject
from test_local_server import INSTRUCTION, jsonl, wait_terminal

from aeval.local import Limits, LocalBatchServer, ModelSpec


@pytest.fixture(scope="module")
def server(dataset: pl.DataFrame):  # type: ignore[no-untyped-def]
    models = {"gpt-bad": ModelSpec("synthetic", accuracy=0.0, failure_mix={"http_error": 1}),  # type: ignore[dict-item]
              "*": ModelSpec()}  # fmt: skip
    with LocalBatchServer(
        dataset=dataset, models=models, limits=Limits(max_file_bytes=50_000)
    ) as s:
        yield s


@pytest.fixture
def client(server: LocalBatchServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="local")


def test_files_upload_retrieve_list_delete(client: openai.OpenAI, dataset: pl.DataFrame) -> None:
    data = jsonl(dataset, 3)
    created = client.files.create(file=("a.jsonl", data), purpose="batch")
    assert isinstance(created, FileObject)
    assert (created.filename, created.bytes, created.status) == ("a.jsonl", len(data), "processed")
    assert client.files.retrieve(created.id) == created
    assert client.files.content(created.id).content == data
    other = client.files.create(file=("b.jsonl", b"{}"), purpose="user_data")
    listed = [f.id for f in client.files.list()]
    assert listed.index(other.id) < listed.index(created.id)  # newest first
    assert [f.id for f in client.files.list(purpose="user_data")] == [other.id]
    deleted = client.files.delete(other.id)
    assert deleted.deleted and deleted.id == other.id
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(other.id)
    with pytest.raises(openai.NotFoundError):
        client.files.content(other.id)
    with pytest.raises(openai.NotFoundError):
        client.files.delete(other.id)


def test_upload_over_the_limit_is_413(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.files.create(file=("big.jsonl", b"x" * 60_000), purpose="batch")
    assert caught.value.status_code == 413
    assert caught.value.code == "file_too_large"


def test_upload_needs_a_known_purpose(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="purpose"):
        client.files.create(file=("a.jsonl", b"{}"), purpose="nonsense")  # type: ignore[arg-type]


def test_batch_create_rejects_bad_parameters(client: openai.OpenAI, dataset: pl.DataFrame) -> None:
    file_id = client.files.create(file=("a.jsonl", jsonl(dataset, 2)), purpose="batch").id
    other = client.files.create(file=("a.jsonl", jsonl(dataset, 2)), purpose="user_data").id
    cases = [
        ({"endpoint": "/v1/embeddings"}, "endpoint"),
        ({"completion_window": "1h"}, "completion_window"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"input_file_id": other}, "input_file_id"),
    ]
    for override, param in cases:
        params = {
            "input_file_id": file_id,
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            **override,
        }
        with pytest.raises(openai.BadRequestError) as caught:
            client.batches.create(**params)  # type: ignore[arg-type]
        assert caught.value.param == param, override
    with pytest.raises(openai.NotFoundError):
        client.batches.create(
            input_file_id="file-missing", endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_missing")
    with pytest.raises(openai.NotFoundError):
        client.batches.cancel("batch_missing")


def test_batches_list_paginates_newest_first(client: openai.OpenAI, dataset: pl.DataFrame) -> None:
    file_id = client.files.create(file=("a.jsonl", jsonl(dataset, 1)), purpose="batch").id
    made = [
        client.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"n": str(i), "page_test": "yes"},
        ).id
        for i in range(5)
    ]
    first = client.batches.list(limit=2)
    assert [b.id for b in first.data] == made[::-1][:2]
    assert first.has_more is True
    everything = [b.id for b in client.batches.list(limit=2)]  # auto-paging follows `after`
    assert everything[:5] == made[::-1]
    last = client.batches.list(limit=100, after=made[1])
    assert made[0] in [b.id for b in last.data] and made[1] not in [b.id for b in last.data]
    with pytest.raises(openai.BadRequestError, match="limit"):
        client.batches.list(limit=1000)


def test_chat_completions_endpoint(client: openai.OpenAI, dataset: pl.DataFrame) -> None:
    question, answer = dataset["question"][5], dataset["answer"][5]
    completion = client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": "You are a verifier."},
            {"role": "user", "content": question + "\n" + INSTRUCTION},
        ],
    )
    assert completion.model == "gpt-4o" and completion.object == "chat.completion"
    assert completion.choices[0].message.content.endswith(f"<answer>{answer}</answer>")  # type: ignore[union-attr]
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model="gpt-bad", messages=[{"role": "user", "content": question}]
        )


def test_raw_json_is_what_openai_sends(server: LocalBatchServer, dataset: pl.DataFrame) -> None:
    upload = httpx.post(
        f"{server.base_url}/files",
        files={"file": ("in.jsonl", jsonl(dataset, 2))},
        data={"purpose": "batch"},
    )
    assert upload.status_code == 200
    created = httpx.post(
        f"{server.base_url}/batches",
        json={
            "input_file_id": upload.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
    ).json()
    assert set(created) == set(Batch.model_fields) - {"usage"} | {"usage"}
    assert created["object"] == "batch" and created["status"] == "validating"
    assert created["request_counts"] == {"total": 0, "completed": 0, "failed": 0}
    assert created["expires_at"] == created["created_at"] + 86400
    unknown = httpx.get(f"{server.base_url}/batches/batch_nope")
    assert unknown.status_code == 404
    assert set(unknown.json()["error"]) == {"message", "type", "param", "code"}
    assert httpx.get(f"{server.base_url}/nowhere").status_code == 404
    bad_json = httpx.post(f"{server.base_url}/batches", content=b"{oops")
    assert (
        bad_json.status_code == 400 and bad_json.json()["error"]["type"] == "invalid_request_error"
    )


def test_auth_is_enforced_when_a_key_is_set(dataset: pl.DataFrame) -> None:
    with LocalBatchServer(dataset=dataset, api_key="sk-local") as server:
        wrong = openai.OpenAI(base_url=server.base_url, api_key="sk-other")
        with pytest.raises(openai.AuthenticationError) as caught:
            wrong.batches.list()
        assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
        assert httpx.get(f"{server.base_url}/batches").status_code == 401
        right = openai.OpenAI(base_url=server.base_url, api_key="sk-local")
        file_id = right.files.create(file=("a.jsonl", jsonl(dataset, 2)), purpose="batch").id
        batch = right.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert wait_terminal(right, batch.id).status == "completed"


def test_every_response_carries_a_request_id(client: openai.OpenAI) -> None:
    raw = client.batches.with_raw_response.list()
    assert raw.headers["x-request-id"].startswith("req_")
    assert raw.parse().data is not None
