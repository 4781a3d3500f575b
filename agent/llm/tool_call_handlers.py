"""llama-cpp-python chat handlers under which every request with tools lets the model see them.
Registered by ``agent.llm.llama_server`` (they run inside the model server's process, never in
turnplan's) as ``embedded_models.GGUF_TEMPLATE_TOOLS`` (``gguf_template_tools``: the model calls
tools the way it was trained to, through its GGUF's own chat template, and its ``<tool_call>``
blocks become OpenAI ``tool_calls``) and ``embedded_models.CHATML_TOOLS`` (``chatml_tools``: for a
GGUF without a template, llama-cpp-python's ``chatml-function-calling`` asked for ``auto``).

Why not llama-cpp-python's ``chatml-function-calling``: when a request has tools but no
``tool_choice`` (what ``bind_tools`` sends by default, so every call of the full prompt profile
and of planning ``auto``) it renders the prompt with no tools at all; its template also drops
``tool`` messages, so the model never sees a tool's result. Qwen2.5's template (in the GGUF) lists
the tools in the system message, shows results as ``<tool_response>``, and the model answers
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

What each request gets:

- tools with ``tool_choice`` absent, ``"auto"`` or ``"required"``: the template with the tools;
  the text is generated freely and each ``<tool_call>`` block becomes a tool call (a block whose
  JSON does not parse becomes a call with the raw text as its arguments, which the client reports
  as an invalid tool call instead of losing it);
- a named ``tool_choice`` or a ``response_format``: llama-cpp-python's template handler as is,
  which constrains the output with a grammar built from the schema;
- no tools: the template handler as is.

A streamed request with free tool use is generated whole, then sent as one chunk plus the final
one: the tool calls are only known once the text is complete.

Every request's tool schemas and ``response_format`` are first made safe for llama.cpp's grammar
(``grammar_safe``): a bound of more than ``GRAMMAR_MAX_REPEAT`` characters or items is lowered
to it, because a longer one crashes the server instead of failing the request.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_CALLS_START = ('{"name"', "{{", "```")
_FENCE = re.compile(r"```(?:json)?")
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_FREE_CHOICES = (None, "auto", "required")

GRAMMAR_MAX_REPEAT = 500
"""The largest ``maxLength``/``minLength``/``maxItems``/``minItems`` a schema keeps on its way
to llama-cpp-python's grammar. Its JSON-schema converter writes a string of at most n characters
(or a list of at most n items) as n nested optional groups, and llama.cpp's grammar parser gives
up on about a thousand of them ("failed to parse grammar"); the server then samples with no
grammar and dies in libllama (a segmentation fault: the client sees the connection dropped, and
the next call waits for a restart). The personal-task tools' ``description`` (``maxLength``
2000) did that whenever a full-profile model called ``add_task`` or ``update_task``. Measured on
llama-cpp-python 0.3.36 with Gemma 3 270M: 1,000 parses, 1,100 does not. The tools still check
their own limits; the model is only kept from writing more than this in one argument."""

_BOUNDS = ("maxLength", "minLength", "maxItems", "minItems")


def grammar_safe(schema: Any) -> Any:
    """A copy of ``schema`` (a JSON schema, a list of tools, a ``response_format``, or anything
    holding them) with every length or item-count bound above ``GRAMMAR_MAX_REPEAT`` lowered to
    it; the rest as it was."""
    if isinstance(schema, dict):
        safe = {key: grammar_safe(value) for key, value in schema.items()}
        for key in _BOUNDS:
            bound = safe.get(key)
            if (
                isinstance(bound, int)
                and not isinstance(bound, bool)
                and bound > GRAMMAR_MAX_REPEAT
            ):
                safe[key] = GRAMMAR_MAX_REPEAT
        return safe
    if isinstance(schema, list):
        return [grammar_safe(item) for item in schema]
    return schema


def _template_handler(llama: Any) -> Any:
    """llama-cpp-python's handler for the GGUF's own chat template (public API only)."""
    from llama_cpp import llama_chat_format

    cached = getattr(llama, "_turnplan_template_handler", None)
    if cached is not None:
        return cached
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ValueError(
            "This GGUF has no chat template; serve it with chat_format chatml-function-calling."
        )
    eos_id = llama.token_eos()
    bos_id = llama.token_bos()
    handler = llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama.detokenize([eos_id], special=True).decode("utf-8", "replace"),
        bos_token=llama.detokenize([bos_id], special=True).decode("utf-8", "replace"),
        stop_token_ids=[eos_id],
    ).to_chat_handler()
    llama._turnplan_template_handler = handler
    return handler


def _with_argument_objects(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages whose assistant tool calls carry their arguments as objects, as chat templates
    expect (the OpenAI wire format has them as JSON strings, which would be quoted twice)."""
    converted = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not calls:
            converted.append(message)
            continue
        new_calls = []
        for call in calls:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                with contextlib.suppress(ValueError):  # left as sent: the template quotes it
                    function["arguments"] = json.loads(arguments)
            new_calls.append({**call, "function": function})
        converted.append({**message, "tool_calls": new_calls})
    return converted


def _bare_calls(text: str) -> list[str] | None:
    """The reply as a run of ``{"name": ..., "arguments": ...}`` objects, or None.

    ``<tool_call>`` is a special token of Qwen2.5's vocabulary, and llama.cpp leaves special
    tokens out of the text it returns: the tags are gone and only the JSON objects remain.
    """
    decoder = json.JSONDecoder()
    bodies = []
    position = 0
    text = _FENCE.sub("", text).strip()
    while position < len(text):
        doubled = text.startswith("{{", position)
        try:
            # Qwen2.5-Coder 1.5B's template shows the format as {{"name": ...}} (braces escaped
            # for a formatter that never ran), and the model copies them.
            parsed, end = decoder.raw_decode(text, position + 1 if doubled else position)
        except ValueError:
            return None
        if not (isinstance(parsed, dict) and "name" in parsed and "arguments" in parsed):
            return None
        bodies.append(text[position + 1 if doubled else position : end])
        position = end + 1 if doubled and text.startswith("}", end) else end
        while position < len(text) and text[position].isspace():
            position += 1
    return bodies or None


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(content left outside the calls or None, OpenAI tool calls) of a model's reply."""
    # A sentence may come before the calls: they start at the first of these marks.
    marks = [found for found in map(text.find, _CALLS_START) if found >= 0]
    start = min(marks, default=0)
    bare = _bare_calls(text[start:])
    if bare is not None:
        text = text[:start] + "".join(f"<tool_call>{body}</tool_call>" for body in bare)
    calls: list[dict[str, Any]] = []
    for match in _TOOL_CALL.finditer(text):
        body = match.group(1).strip()
        if body.startswith("{{") and body.endswith("}}"):
            body = body[1:-1]  # the doubled braces, as in _bare_calls
        name: str | None
        try:
            parsed = json.loads(body)
            name = parsed.get("name") if isinstance(parsed, dict) else None
            arguments = parsed.get("arguments", {}) if isinstance(parsed, dict) else None
            raw = json.dumps(arguments, ensure_ascii=False) if isinstance(arguments, dict) else body
        except ValueError:
            found = _NAME.search(body)
            name = found.group(1) if found else None
            raw = body
        if not isinstance(name, str) or not name:
            continue
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": raw},
            }
        )
    if not calls:
        return text, []
    rest = _TOOL_CALL.sub("", text).strip()
    return (rest or None), calls


def _as_chunks(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    choice = response["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [
            {**call, "index": index} for index, call in enumerate(message["tool_calls"])
        ]
    common = {
        "id": response["id"],
        "object": "chat.completion.chunk",
        "created": response["created"],
        "model": response["model"],
    }
    yield {
        **common,
        "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}],
    }
    yield {
        **common,
        "choices": [
            {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": None}
        ],
        "usage": response.get("usage"),
    }


def gguf_template_tools(
    llama: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    response_format: Any = None,
    **kwargs: Any,
) -> Any:
    """The chat-completion handler (llama-cpp-python's handler signature)."""
    handler = _template_handler(llama)
    messages = _with_argument_objects(messages)
    tools, response_format = grammar_safe(tools), grammar_safe(response_format)
    free_tools = bool(tools) and tool_choice in _FREE_CHOICES and response_format is None
    if not free_tools:
        return handler(
            llama=llama,
            messages=messages,
            tools=tools,
            tool_choice=None if tool_choice in _FREE_CHOICES else tool_choice,
            stream=stream,
            response_format=response_format,
            **kwargs,
        )
    response: dict[str, Any] = handler(
        llama=llama, messages=messages, tools=tools, tool_choice=None, stream=False, **kwargs
    )
    choice = response["choices"][0]
    content, calls = parse_tool_calls(choice["message"].get("content") or "")
    if calls:
        choice["message"] = {"role": "assistant", "content": content, "tool_calls": calls}
        choice["finish_reason"] = "tool_calls"
    response.setdefault("created", int(time.time()))
    return _as_chunks(response) if stream else response


def chatml_tools(
    llama: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    **kwargs: Any,
) -> Any:
    """``chatml-function-calling`` with an absent choice read as ``auto`` (as OpenAI reads it).

    That handler renders no tools at all without a choice, and refuses ``auto`` when streamed
    ("Automatic streaming tool choice is not supported"), which LangGraph's ``messages`` stream
    mode asks for: such a call is generated whole and sent as chunks.
    """
    from llama_cpp.llama_chat_format import chatml_function_calling

    handler: Any = chatml_function_calling
    tools = grammar_safe(tools)
    if "response_format" in kwargs:
        kwargs["response_format"] = grammar_safe(kwargs["response_format"])
    if not tools or tool_choice not in _FREE_CHOICES or kwargs.get("response_format"):
        return handler(
            llama=llama,
            messages=messages,
            tools=tools,
            tool_choice=tool_choice,
            stream=stream,
            **kwargs,
        )
    response: dict[str, Any] = handler(
        llama=llama, messages=messages, tools=tools, tool_choice="auto", stream=False, **kwargs
    )
    return _as_chunks(response) if stream else response
