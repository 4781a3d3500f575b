"""How a Qwen model's reply becomes OpenAI tool calls on the embedded server (the handler's
parsing, without a model): every shape the real models were seen to answer in is understood,
and text that is not a call stays the answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from agent.llm.tool_call_handlers import (
    QWEN25_CALL_EXAMPLE,
    TOOL_RESPONSE_STOP,
    parse_tool_calls,
    trained_template,
)
from agent.turn.empty_answer import is_written_tool_call

RECORDED = json.loads((Path(__file__).parent / "qwen_replies.json").read_text(encoding="utf-8"))

ADD_MILK = {"name": "add_task", "arguments": {"title": "buy milk"}}


def _calls(
    text: str, tools: list[str] | None = None
) -> tuple[str | None, list[tuple[str, object]]]:
    content, calls = parse_tool_calls(text, tools or ())
    return content, [
        (call["function"]["name"], json.loads(call["function"]["arguments"])) for call in calls
    ]


@pytest.mark.parametrize(
    "reply",
    [
        # llama.cpp drops the special <tool_call> tokens from the text (Qwen2.5-Coder 0.5B)
        json.dumps(ADD_MILK),
        # the template's own example, braces doubled (Qwen2.5-Coder 1.5B copies it)
        "{" + json.dumps(ADD_MILK) + "}",
        # a fenced block (Qwen2.5-Coder 1.5B)
        "```json\n" + json.dumps(ADD_MILK, indent=2) + "\n```",
        # the tags, when they survive
        "<tool_call>\n" + json.dumps(ADD_MILK) + "\n</tool_call>",
    ],
    ids=["bare", "doubled-braces", "fenced", "tagged"],
)
def test_each_shape_of_a_call_becomes_a_tool_call(reply: str) -> None:
    assert _calls(reply) == (None, [("add_task", {"title": "buy milk"})])


def test_several_calls_and_a_sentence_before_them() -> None:
    reply = (
        "I'll add both.\n"
        + json.dumps(ADD_MILK)
        + "\n"
        + json.dumps({"name": "add_task", "arguments": {"title": "do laundry"}})
    )

    assert _calls(reply) == (
        "I'll add both.",
        [("add_task", {"title": "buy milk"}), ("add_task", {"title": "do laundry"})],
    )


def test_each_call_gets_its_own_id() -> None:
    _, calls = parse_tool_calls(json.dumps(ADD_MILK) + json.dumps(ADD_MILK))

    assert len({call["id"] for call in calls}) == 2


def test_a_call_with_broken_json_is_kept_with_its_raw_text() -> None:
    """Not lost and not shown as an answer: the client reports it as an invalid tool call."""
    content, calls = parse_tool_calls('<tool_call>\n{"name": "add_task", "arguments": {"title": ')

    assert content is None
    assert calls[0]["function"]["name"] == "add_task"
    assert calls[0]["function"]["arguments"].endswith('{"title":')


@pytest.mark.parametrize(
    "reply",
    ["You have 2 open tasks.", 'The result is {"total": 2}.', '{"name": "Ann", "age": 3}'],
)
def test_an_answer_that_is_not_a_call_stays_the_answer(reply: str) -> None:
    assert parse_tool_calls(reply) == (reply, [])


# What the packaged models really wrote (tests/unit/model/qwen_replies.json, recorded with the
# full prompt profile): each reply becomes exactly the calls it unambiguously holds, and one the
# server cannot run comes back as a tool call written as text, which the graph asks again.


def _recorded(written: bool) -> list[Any]:
    return [
        pytest.param(reply, id=reply["id"])
        for reply in RECORDED["replies"]
        if reply["written"] is written
    ]


@pytest.mark.parametrize("recorded", _recorded(written=False))
def test_a_recorded_reply_becomes_the_calls_it_holds(recorded: dict[str, Any]) -> None:
    content, calls = _calls(recorded["reply"], recorded.get("tools"))

    assert [list(call) for call in calls] == recorded["calls"]
    assert content == recorded["content"]


@pytest.mark.parametrize("recorded", _recorded(written=True))
def test_a_recorded_call_with_prose_after_it_is_not_run_and_reads_as_a_written_call(
    recorded: dict[str, Any],
) -> None:
    """Calls mixed with results the model made up: which of them it meant is a guess, so none
    runs, and the text is no answer either (the graph asks the model again once)."""
    content, calls = parse_tool_calls(recorded["reply"], recorded.get("tools") or ())

    assert calls == []
    assert content is not None and "<tool_call>" in content
    # Only the lost tags are put back; the model's words are as it wrote them.
    assert content.replace("<tool_call>", "").replace("</tool_call>", "") == recorded["reply"]
    assert is_written_tool_call(AIMessage(content=content))


def test_a_recorded_list_of_one_object_is_read_as_that_object() -> None:
    """1.5B wrote ``"arguments": [{"items": [...]}]`` for create_todo: one reading only."""
    [recorded] = [r for r in RECORDED["replies"] if r["id"] == "1.5b-fenced-list-arguments"]

    _, [(name, arguments)] = _calls(recorded["reply"])

    assert name == "create_todo"
    assert [item["title"] for item in arguments["items"]] == ["call mom", "pay rent"]


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "add_task", "arguments": [{"title": "a"}, {"title": "b"}]}',
        '{"name": "add_task", "arguments": []}',
        '{"name": "add_task", "arguments": "buy milk"}',
    ],
    ids=["two-objects", "empty-list", "a-string"],
)
def test_arguments_with_more_than_one_reading_are_not_run(reply: str) -> None:
    content, calls = parse_tool_calls(reply)

    assert calls == []
    assert is_written_tool_call(AIMessage(content=content or ""))


@pytest.mark.parametrize(
    ("reply", "tools"),
    [
        ('create_todo\n{"items": [{"title": "a"}]}', ["add_task"]),  # not a tool it was offered
        ('create_todo\n{"items": [{"title": "a"}]}\nDone.', ["create_todo"]),  # prose after
        ('Use create_todo\n{"items": [{"title": "a"}]}', ["create_todo"]),  # not the name alone
    ],
    ids=["tool-not-offered", "prose-after", "sentence-before"],
)
def test_a_name_then_arguments_is_a_call_only_when_it_is_the_whole_reply(
    reply: str, tools: list[str]
) -> None:
    assert parse_tool_calls(reply, tools)[1] == []


def test_a_tool_name_then_its_arguments_is_a_call() -> None:
    assert _calls('create_todo\n{"items": [{"title": "a"}]}', ["create_todo"]) == (
        None,
        [("create_todo", {"items": [{"title": "a"}]})],
    )


# The chat template: the tools are shown as Qwen2.5 was trained to see them.


def _system_prompt(template: str) -> str:
    jinja2 = pytest.importorskip("jinja2")  # llama-cpp-python's renderer ('local' extra)
    environment = jinja2.Environment()
    return environment.from_string(template).render(
        messages=[{"role": "user", "content": "Add 'buy milk'."}],
        tools=TOOLS,
        add_generation_prompt=True,
    )


def test_the_1_5b_template_shows_the_call_format_with_single_braces_as_trained() -> None:
    recorded = RECORDED["chat_templates"]["qwen2.5-coder-1.5b"]
    trained_format = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}'

    assert '{{"name": <function-name>' in _system_prompt(recorded)  # the GGUF's as shipped
    shown = _system_prompt(trained_template(recorded))

    assert trained_format in shown
    assert "{{" not in shown
    # Now the very template of the 0.5B GGUF, which is Qwen2.5's own.
    assert trained_template(recorded) == RECORDED["chat_templates"]["qwen2.5-coder-0.5b"]


def test_a_template_without_that_line_is_left_as_it_is() -> None:
    template = RECORDED["chat_templates"]["qwen2.5-coder-0.5b"]

    assert QWEN25_CALL_EXAMPLE in template
    assert trained_template(template) == template
    assert trained_template(TEMPLATE) == TEMPLATE


# The handler itself, around a stand-in for llama_cpp.Llama that records the prompt it is given
# and answers with a scripted text: what the model sees, and what the client gets back.

TEMPLATE = (
    "{% for t in tools or [] %}TOOL {{ t.function.name }}\n{% endfor %}"
    "{% for m in messages %}{{ m.role }}:"
    "{% if m.tool_calls %}{% for c in m.tool_calls %} CALL {{ c.function.name }} "
    "{{ c.function.arguments | tojson }}{% endfor %}"
    "{% else %} {{ m.content }}{% endif %}\n{% endfor %}"
)


class ScriptedLlama:
    """What the chat handler uses of ``llama_cpp.Llama``, with the prompt kept as text."""

    verbose = False

    def __init__(self, reply: str) -> None:
        self.metadata = {"tokenizer.chat_template": TEMPLATE}
        self.reply = reply
        self.prompts: list[str] = []
        self.options: list[dict[str, object]] = []

    def token_eos(self) -> int:
        return 2

    def token_bos(self) -> int:
        return 1

    def detokenize(self, tokens: list[int], special: bool = False) -> bytes:
        return b"</s>" if tokens == [2] else b"<s>"

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> str:
        return text.decode()

    def create_completion(self, *, prompt: str, **options: object) -> dict[str, object]:
        self.prompts.append(prompt)
        self.options.append(options)
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 1,
            "model": "local",
            "choices": [
                {"text": self.reply, "index": 0, "logprobs": None, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add_task",
            "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
        },
    }
]
HISTORY = [
    {"role": "user", "content": "Add 'buy milk'."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add_task", "arguments": '{"title": "buy milk"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "added task 7"},
]


def test_the_model_sees_its_tools_and_the_tool_results_without_a_tool_choice() -> None:
    pytest.importorskip("llama_cpp")
    from agent.llm.tool_call_handlers import gguf_template_tools

    llama = ScriptedLlama(json.dumps(ADD_MILK))

    response = gguf_template_tools(llama=llama, messages=HISTORY, tools=TOOLS)

    [prompt] = llama.prompts
    assert "TOOL add_task" in prompt
    assert "tool: added task 7" in prompt
    assert 'CALL add_task {"title": "buy milk"}' in prompt  # an object, not a quoted string
    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "add_task"


def test_a_reply_with_tools_ends_before_a_tool_response_the_model_would_invent() -> None:
    """The 0.5B model went on after its call with a made-up ``<tool_response>``: generation
    stops there, so the call alone comes back (and the client's own stops are kept)."""
    pytest.importorskip("llama_cpp")
    from agent.llm.tool_call_handlers import gguf_template_tools

    llama = ScriptedLlama(json.dumps(ADD_MILK))

    gguf_template_tools(llama=llama, messages=HISTORY, tools=TOOLS, stop=["\nUser:"])

    stops = llama.options[0]["stop"]
    assert isinstance(stops, list)
    assert TOOL_RESPONSE_STOP in stops and "\nUser:" in stops


def test_a_streamed_call_arrives_as_chunks_with_the_tool_call() -> None:
    pytest.importorskip("llama_cpp")
    from agent.llm.tool_call_handlers import gguf_template_tools

    chunks = list(
        gguf_template_tools(
            llama=ScriptedLlama(json.dumps(ADD_MILK)), messages=HISTORY, tools=TOOLS, stream=True
        )
    )

    assert chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "add_task"
    assert chunks[0]["choices"][0]["delta"]["tool_calls"][0]["index"] == 0
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_plain_answer_stays_a_plain_answer() -> None:
    pytest.importorskip("llama_cpp")
    from agent.llm.tool_call_handlers import gguf_template_tools

    response = gguf_template_tools(
        llama=ScriptedLlama("You have one open task."), messages=HISTORY, tools=TOOLS
    )

    assert response["choices"][0]["message"]["content"] == "You have one open task."
    assert response["choices"][0]["finish_reason"] == "stop"


def test_the_handler_knows_its_tools_names_when_a_call_is_the_name_then_the_arguments() -> None:
    pytest.importorskip("llama_cpp")
    from agent.llm.tool_call_handlers import gguf_template_tools

    reply = 'add_task\n{"title": "buy milk"}'
    response = gguf_template_tools(llama=ScriptedLlama(reply), messages=HISTORY, tools=TOOLS)

    [call] = response["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "add_task", "arguments": '{"title": "buy milk"}'}


def test_a_call_the_server_does_not_run_reaches_the_client_as_a_written_call() -> None:
    """What the graph sees of a recorded reply with its call among made-up results: no tool
    call, and a text it reads as a written call (asked again), not as the answer."""
    pytest.importorskip("llama_cpp")
    from agent.llm.tool_call_handlers import gguf_template_tools

    [recorded] = [r for r in RECORDED["replies"] if r["id"] == "0.5b-fenced-call-then-prose"]
    response = gguf_template_tools(
        llama=ScriptedLlama(recorded["reply"]), messages=HISTORY, tools=TOOLS
    )

    message = response["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert is_written_tool_call(AIMessage(content=message["content"]))


def test_grammar_bounds_llama_cpp_cannot_parse_are_lowered_and_the_request_is_left_alone() -> None:
    from agent.llm.tool_call_handlers import GRAMMAR_MAX_REPEAT, grammar_safe

    description = {"type": "string", "maxLength": 2000}
    tools = [
        {
            "type": "function",
            "function": {
                "name": "add_task",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string", "minLength": 1, "maxLength": 200},
                        "description": description,
                        "tags": {"type": "array", "items": description, "maxItems": 5000},
                    },
                    "required": ["title"],
                },
            },
        }
    ]

    safe = grammar_safe(tools)

    properties = safe[0]["function"]["parameters"]["properties"]
    # What llama.cpp's grammar parser fails on (and the server then dies of) is lowered...
    assert properties["description"]["maxLength"] == GRAMMAR_MAX_REPEAT
    assert properties["tags"]["maxItems"] == GRAMMAR_MAX_REPEAT
    assert properties["tags"]["items"]["maxLength"] == GRAMMAR_MAX_REPEAT
    # ...what it parses is kept, and so is everything else about the tool.
    assert properties["title"] == {"type": "string", "minLength": 1, "maxLength": 200}
    assert safe[0]["function"]["parameters"]["required"] == ["title"]
    # The caller's schema is not changed under it.
    assert description == {"type": "string", "maxLength": 2000}
    assert grammar_safe(None) is None
