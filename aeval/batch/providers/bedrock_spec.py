"""Amazon Bedrock batch inference (``bedrock/MODEL_ID``): what aeval knows before talking to it.

A job reads records ``{"recordId", "modelInput"}`` from S3, where ``modelInput`` is the
body the model takes in an ``InvokeModel`` request ("Format and upload your batch
inference data", https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-data.html).
That body differs per model family; the family is read from the model id (after an
inference profile's region prefix: ``us.``, ``eu.``, ``apac.``, ``global.``…):

- ``anthropic.claude-*``: the Anthropic Messages body with ``anthropic_version``
  ``"bedrock-2023-05-31"`` and no ``model`` (the job names it), as "Anthropic Claude
  Messages API" (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html)
  gives it: ``max_tokens`` (required), ``system``, ``messages``, ``temperature`` or
  ``top_p``, and extended thinking as ``thinking: {"type": "enabled", "budget_tokens"}``.
  The body and its checks are :mod:`aeval.batch.providers.claude_messages`' (no seed;
  temperature at most 1; not both sampling settings; a budget of at least 1,024 below
  ``max_tokens``; no effort level).
- ``amazon.nova-*``: the Nova ``messages-v1`` body ("Request and response schema",
  https://docs.aws.amazon.com/nova/latest/nova2-userguide/request-response-schema.html):
  ``system: [{"text"}]``, ``messages: [{"role": "user", "content": [{"text"}]}]``,
  ``inferenceConfig: {"maxTokens", "temperature", "topP"}``. No seed, no reasoning
  setting (Nova 2's ``reasoningConfig`` is not sent: nothing here could check which
  Nova takes it).

Any other family is refused before anything is written, naming the two it takes.

Credentials are boto3's own chain (``AWS_ACCESS_KEY_ID``…, ``AWS_PROFILE``, a role);
the region is boto3's (``AWS_REGION`` / ``AWS_DEFAULT_REGION``). The job needs an S3
prefix for the records and results (``--bedrock-s3 s3://BUCKET/PREFIX`` or
``AEVAL_BEDROCK_S3``) and a service role Bedrock assumes to read and write it
(``--bedrock-role-arn`` or ``AEVAL_BEDROCK_ROLE_ARN``). ``AWS_ENDPOINT_URL_BEDROCK`` and
``AWS_ENDPOINT_URL_S3`` (boto3's own variables) point it elsewhere: the offline stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aeval.api_settings import Credentials, ShardLimits
from aeval.batch.providers import anthropic_spec
from aeval.batch.providers.bedrock_limits import (
    MAX_FILE_BYTES,
    MAX_JOB_BYTES,
    MAX_RECORDS_PER_FILE,
    MAX_RECORDS_PER_JOB,
)
from aeval.batch.providers.claude_messages import check_cloud_settings, cloud_body
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.errors import ConfigError
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, continue_chat, format_prompt

__all__ = [
    "ANTHROPIC_VERSION",
    "CREDENTIAL_VARIABLES",
    "ROLE_VARIABLE",
    "S3_VARIABLE",
    "SPEC",
    "family",
    "request_body",
]

ANTHROPIC_VERSION = "bedrock-2023-05-31"
# Where boto3's default credential chain looks first (botocore/credentials.py: the
# environment, a named profile, web identity, the container endpoint); a run whose
# credentials live only in ~/.aws/credentials sets AWS_PROFILE=default.
CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
)
S3_VARIABLE = "AEVAL_BEDROCK_S3"
ROLE_VARIABLE = "AEVAL_BEDROCK_ROLE_ARN"
# The account's own "Minimum number of records per batch inference job", where it is not
# the default quota of 100 (aeval.batch.providers.bedrock_limits).
MIN_RECORDS_VARIABLE = "AEVAL_BEDROCK_MIN_RECORDS"
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
# An inference profile's geography before the model id (cross-Region inference).
_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "jp.", "au.", "ca.", "us-gov.", "global.")
# A Nova answer is a few hundred tokens; Nova's own default maxTokens is model-dependent.
DEFAULT_MAX_TOKENS = anthropic_spec.DEFAULT_MAX_TOKENS


def family(model_id: str) -> str | None:
    """``"claude"``, ``"nova"`` or ``None`` (a family aeval has no body for), from a
    model id, an inference profile id, or an ARN ending in one."""
    name = model_id.rsplit("/", 1)[-1].lower()
    for prefix in _PROFILE_PREFIXES:
        if name.startswith(prefix):
            name = name.removeprefix(prefix)
            break
    if name.startswith("anthropic.claude"):
        return "claude"
    if name.startswith("amazon.nova"):
        return "nova"
    return None


def _nova_body(
    question: str, prompt: PromptSettings, gen: GenerationSettings, turns: Sequence[Turn]
) -> dict[str, Any]:
    body: dict[str, Any] = {"schemaVersion": "messages-v1"}
    if prompt.system is not None:
        body["system"] = [{"text": prompt.system}]
    body["messages"] = [
        {"role": "user", "content": [{"text": format_prompt(question, prompt)}]},
        *_nova_turns(turns),
    ]
    config: dict[str, Any] = {
        "maxTokens": gen.max_tokens or gen.max_completion_tokens or DEFAULT_MAX_TOKENS
    }
    if gen.temperature is not None:
        config["temperature"] = gen.temperature
    if gen.top_p is not None:
        config["topP"] = gen.top_p
    body["inferenceConfig"] = config
    return body


def _nova_turns(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """A repair round's earlier answers and feedback as Nova messages (the same
    "Request and response schema" page: ``role`` ``user`` | ``assistant``, ``content`` a
    list of ``{"text"}`` blocks)."""
    return [
        {"role": role, "content": [{"text": text}]}
        for turn in turns
        for role, text in (("assistant", turn.answer), ("user", turn.feedback))
    ]


def request_body(
    model: str,
    question: str,
    prompt: PromptSettings,
    gen: GenerationSettings,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    """One question as the ``InvokeModel`` body of ``model``'s family (the record's
    ``modelInput``), a repair round's earlier turns after it in the family's messages;
    the record itself is written by the adapter."""
    kind = family(model)
    if kind == "claude":
        return cloud_body(
            anthropic_spec.request_body("", question, prompt, gen, turns), ANTHROPIC_VERSION
        )
    if kind == "nova":
        return _nova_body(question, prompt, gen, turns)
    raise ConfigError(_unknown_family(model))


def continue_body(body: dict[str, Any], turns: Sequence[Turn]) -> dict[str, Any]:
    """``body`` with ``turns`` appended to its ``messages``, in its family's shape (a
    Nova body says so by its ``schemaVersion``; a Claude body is Anthropic's)."""
    if body.get("schemaVersion") == "messages-v1":
        return {**body, "messages": [*body["messages"], *_nova_turns(turns)]}
    return continue_chat(body, turns)


def _unknown_family(model: str) -> str:
    return (
        f"bedrock/{model}: aeval writes Bedrock bodies for Anthropic Claude "
        "(anthropic.claude-…) and Amazon Nova (amazon.nova-…) models only"
    )


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    """What Bedrock would refuse for ``model``'s family, said before anything is written."""
    kind = family(model.name)
    if kind is None:
        raise ConfigError(_unknown_family(model.name))
    if gen.seed is not None:
        raise ConfigError(
            f"{model.qualified}: Bedrock's {kind.title()} body has no seed; drop "
            "--generation-seed, or run the Bedrock models in a run of their own"
        )
    if kind == "nova":
        check_reasoning(model, gen, "Amazon Nova on Bedrock", ())
        return
    check_cloud_settings(model, gen, "Bedrock")


def resolve(env: Mapping[str, str]) -> Credentials | None:
    """Credentials when boto3's chain has somewhere to start (one of
    :data:`CREDENTIAL_VARIABLES`), with the S3 prefix, role and region as options."""
    found = next((v for v in CREDENTIAL_VARIABLES if (env.get(v) or "").strip()), None)
    if found is None:
        return None
    options = [
        (name, value)
        for name, variable in (
            ("s3", S3_VARIABLE),
            ("role_arn", ROLE_VARIABLE),
            ("min_records", MIN_RECORDS_VARIABLE),
        )
        if (value := (env.get(variable) or "").strip())
    ]
    region = next((env[v].strip() for v in REGION_VARIABLES if (env.get(v) or "").strip()), "")
    if region:
        options.append(("region", region))
    # The key itself stays with boto3, which reads its own chain: only where it starts.
    return Credentials(api_key=found, options=tuple(options))


SPEC = ProviderSpec(
    name="bedrock",
    title="Amazon Bedrock",
    key_variables=CREDENTIAL_VARIABLES,
    base_url_variable=None,
    # One input file per job: under the file's and the job's limits, with a margin
    # for the record envelope the adapter adds around each body.
    limits=ShardLimits(
        max_requests=min(MAX_RECORDS_PER_JOB, MAX_RECORDS_PER_FILE) - 1000,
        max_bytes=min(MAX_FILE_BYTES, MAX_JOB_BYTES) * 9 // 10,
    ),
    adapter="aeval.batch.providers.bedrock_api:BedrockBatchProvider",
    request_url="bedrock:InvokeModel",
    request_body=request_body,
    continue_body=continue_body,
    check_request=check_request,
    credentials=resolve,
    extra="bedrock",
)
