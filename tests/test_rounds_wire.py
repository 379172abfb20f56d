"""A repair round's request bodies held against each provider SDK's own request types
(#44): the earlier answers and feedback in every provider's message format, and a
reasoning variant's setting kept in every round.

Sources (the installed SDKs, read in .venv/lib/python3.11/site-packages):
openai types/chat/completion_create_params.py and chat_completion_assistant_message_param.py;
openai types/responses/response_create_params.py and easy_input_message_param.py
(``input`` as a list of messages, role ``assistant`` for "previous assistant responses");
anthropic types/message_create_params.py, user_message_param.py and
assistant_message_param.py; google-genai types.Content ("role ... Must be either 'user' or
'model'");
together types/chat/completion_create_params.py and chat_completion_assistant_message_param.py;
groq types/chat/completion_create_params.py and chat_completion_assistant_message_param.py;
mistralai client/models/chatcompletionrequest.py and assistantmessage.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from aeval.batch.providers.registry import provider_spec
from aeval.feedback import Turn, render_feedback
from aeval.model_names import parse_model
from aeval.prompts import (
    GenerationSettings,
    PromptSettings,
    continue_chat,
    continue_responses,
    format_prompt,
    request_body,
    responses_body,
)

PROMPT = PromptSettings(system="You write SMT-LIB.")
ANSWER_1 = "<think>x grows</think><answer>(assert (> in0 3))</answer>"
ANSWER_2 = "<answer>(assert (>= in0 3))</answer>"
TURNS = (
    Turn(
        ANSWER_1,
        render_feedback(
            "counterexample",
            status="not_equivalent",
            reason="too strong",
            direction="too_strong",
            counterexample={"in0": "3"},
        ),
    ),
    Turn(ANSWER_2, render_feedback("reason", status="parse_error", reason="unexpected ')'")),
)


def _keys(cls: Any) -> set[str]:
    return set(cls.__required_keys__) | set(cls.__optional_keys__)


def _holds(params: Any, value: dict[str, Any]) -> None:
    """``value`` validates as the SDK's TypedDict, with no key the TypedDict lacks."""
    TypeAdapter(params).validate_python(value)
    assert set(value) <= _keys(params), set(value) - _keys(params)


def _body(model: str, turns: tuple[Turn, ...] = TURNS, **settings: Any) -> dict[str, Any]:
    parsed = parse_model(model)
    gen = GenerationSettings(**settings).with_reasoning(parsed.reasoning)
    spec = provider_spec(parsed.provider)
    spec.check_request(parsed, gen, PROMPT)
    return spec.request_body(parsed.name, "N=3?", PROMPT, gen, turns)


def _chat_turns(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]


WANT = [
    ("user", format_prompt("N=3?", PROMPT)),
    ("assistant", ANSWER_1),
    ("user", TURNS[0].feedback),
    ("assistant", ANSWER_2),
    ("user", TURNS[1].feedback),
]


@pytest.mark.parametrize("model", ["gpt-5@high", "together/deepseek-r1@low", "groq/gpt-oss@low"])
def test_openai_compatible_chat_bodies_carry_the_turns_as_messages(model: str) -> None:
    provider = parse_model(model).provider
    if provider == "openai":
        from openai.types.chat.chat_completion_assistant_message_param import (
            ChatCompletionAssistantMessageParam as Assistant,
        )
        from openai.types.chat.chat_completion_user_message_param import (
            ChatCompletionUserMessageParam as User,
        )
        from openai.types.chat.completion_create_params import (
            CompletionCreateParamsNonStreaming as Params,
        )
    elif provider == "together":
        from together.types.chat.chat_completion_assistant_message_param import (  # type: ignore[no-redef]
            ChatCompletionAssistantMessageParam as Assistant,
        )
        from together.types.chat.chat_completion_user_message_param import (  # type: ignore[no-redef]
            ChatCompletionUserMessageParam as User,
        )
        from together.types.chat.completion_create_params import (  # type: ignore[no-redef]
            CompletionCreateParamsNonStreaming as Params,
        )
    else:
        from groq.types.chat.chat_completion_assistant_message_param import (  # type: ignore[no-redef]
            ChatCompletionAssistantMessageParam as Assistant,
        )
        from groq.types.chat.chat_completion_user_message_param import (  # type: ignore[no-redef]
            ChatCompletionUserMessageParam as User,
        )
        from groq.types.chat.completion_create_params import (  # type: ignore[no-redef]
            CompletionCreateParams as Params,
        )
    body = _body(model)
    _holds(Params, body)
    assert _chat_turns(body) == WANT
    for message in body["messages"][1:]:
        _holds(Assistant if message["role"] == "assistant" else User, message)
    first = _body(model, turns=())
    # the reasoning variant's setting, as in the first round
    assert {k: v for k, v in body.items() if k != "messages"} == {
        k: v for k, v in first.items() if k != "messages"
    }
    assert body["messages"][:2] == first["messages"]


def test_mistral_carries_the_turns_as_its_chat_messages() -> None:
    from mistralai.client.models import AssistantMessage, ChatCompletionRequest

    body = _body("mistral/magistral-medium-latest@high")
    request = ChatCompletionRequest.model_validate(body)
    assert request.reasoning_effort == "high"
    assert _chat_turns(body) == WANT
    assert isinstance(request.messages[2], AssistantMessage)


def _anthropic_message_types() -> tuple[Any, Any]:
    """anthropic's TypedDicts of an assistant and a user message: their own modules in
    the current SDK, the one ``MessageParam`` at the floor (anthropic 1.3 has no
    types/assistant_message_param.py)."""
    try:
        from anthropic.types.assistant_message_param import AssistantMessageParam
        from anthropic.types.user_message_param import UserMessageParam
    except ModuleNotFoundError:
        from anthropic.types.message_param import MessageParam

        return MessageParam, MessageParam
    return AssistantMessageParam, UserMessageParam


def test_anthropic_alternates_user_and_assistant_with_the_thinking_budget_kept() -> None:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    assistant, user = _anthropic_message_types()
    body = _body("anthropic/claude-sonnet-4-5@8192")
    _holds(MessageCreateParamsNonStreaming, body)
    for message in body["messages"]:
        _holds(assistant if message["role"] == "assistant" else user, message)
    assert [(m["role"], m["content"]) for m in body["messages"]] == WANT
    assert body["system"] == PROMPT.system
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}


def test_gemini_names_the_models_turns_model() -> None:
    from google.genai import types

    body = _body("google/gemini-2.5-flash@high")
    contents = [types.Content.model_validate(c) for c in body["contents"]]
    assert [(c.role, "".join(p.text or "" for p in c.parts or [])) for c in contents] == [
        ("model" if role == "assistant" else role, text) for role, text in WANT
    ]
    # Gemini 2.5 takes a thinking budget: its documented mapping of "high" (#45 item 8)
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 24576}


def test_the_responses_api_takes_the_turns_as_input_messages() -> None:
    from openai.types.responses.easy_input_message_param import EasyInputMessageParam
    from openai.types.responses.response_create_params import (
        ResponseCreateParamsNonStreaming,
    )

    gen = GenerationSettings(max_tokens=500, reasoning_effort="high")
    body = responses_body("gpt-5", "N=3?", PROMPT, gen, TURNS)
    _holds(ResponseCreateParamsNonStreaming, body)
    for message in body["input"]:
        _holds(EasyInputMessageParam, message)
    assert [(m["role"], m["content"]) for m in body["input"]] == WANT
    assert body["instructions"] == PROMPT.system and body["reasoning"] == {"effort": "high"}
    # a first round's input stays the one string it always was
    assert responses_body("gpt-5", "N=3?", PROMPT, gen)["input"] == WANT[0][1]


@pytest.mark.parametrize(
    "model",
    [
        "gpt-5@high",
        "anthropic/claude-sonnet-4-5@8192",
        "google/gemini-2.5-flash@high",
        "together/deepseek-r1@low",
        "groq/gpt-oss@low",
        "mistral/magistral-medium-latest@high",
        "xai/grok-3-mini@low",
        "azure/gpt-4o-batch",
        "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0@2048",
        "bedrock/amazon.nova-pro-v1:0",
        "vertex/gemini-2.5-flash@high",
        "vertex/claude-sonnet-4-5@2048",
    ],
)
def test_a_round_continued_from_the_last_request_is_the_body_with_every_turn(model: str) -> None:
    """The engine writes round r + 1 as round r's request with one more turn
    (``continue_body``): byte for byte what the request body hook gives with all the
    turns, so what the engine sends is what the hook (which the tests above hold against
    each SDK) defines."""
    spec = provider_spec(parse_model(model).provider)
    first = _body(model, turns=())
    second = spec.continue_body(first, TURNS[:1])
    third = spec.continue_body(second, TURNS[1:])
    assert json.dumps(second) == json.dumps(_body(model, turns=TURNS[:1]))
    assert json.dumps(third) == json.dumps(_body(model))
    assert first == _body(model, turns=())  # the earlier body is left as it was


def test_the_responses_and_direct_chat_bodies_continue_the_same_way() -> None:
    gen = GenerationSettings(max_tokens=500)
    first = responses_body("gpt-5", "N=3?", PROMPT, gen)
    again = continue_responses(continue_responses(first, TURNS[:1]), TURNS[1:])
    assert json.dumps(again) == json.dumps(responses_body("gpt-5", "N=3?", PROMPT, gen, TURNS))
    chat = request_body("m", "N=3?", PROMPT, gen)
    assert json.dumps(continue_chat(chat, TURNS)) == json.dumps(
        request_body("m", "N=3?", PROMPT, gen, TURNS)
    )


@pytest.mark.parametrize(
    "model",
    [
        "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0",
        "bedrock/amazon.nova-pro-v1:0",
        "vertex/gemini-2.5-flash",
        "vertex/claude-sonnet-4-5",
    ],
)
def test_the_clouds_carry_the_conversation_in_their_familys_messages(model: str) -> None:
    """Bedrock's Claude and Vertex's Claude bodies are Anthropic's Messages (anthropic
    types/message_param.py); Nova's ``messages-v1`` messages hold ``[{"text"}]`` content
    (AWS, "Amazon Nova: request and response schema"); Vertex's Gemini body is a
    GenerateContentRequest whose model turns have role ``model`` (google-genai
    types.Content)."""
    body = _body(model)
    if "contents" in body:
        said = [(c["role"], c["parts"][0]["text"]) for c in body["contents"]]
        assert said == [("model" if r == "assistant" else r, t) for r, t in WANT]
        return
    said = [
        (m["role"], m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
        for m in body["messages"]
    ]
    assert said == WANT
    if "nova" in model:
        assert all(list(m["content"][0]) == ["text"] for m in body["messages"])
    else:
        assistant, user = _anthropic_message_types()
        for message in body["messages"]:
            _holds(assistant if message["role"] == "assistant" else user, message)
