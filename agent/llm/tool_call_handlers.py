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

- tools with ``tool_choice`` absent, ``"auto"`` or ``"required"``: the template with the tools
  (the call format shown as Qwen2.5 was trained on it, ``trained_template``); the text is
  generated freely, up to a ``<tool_response>`` the model would invent, and the calls it holds
  in the forms the packaged models were seen to write (``parse_tool_calls``; the replies are
  recorded in ``tests/unit/model/qwen_replies.json``) become tool calls. A tagged block whose
  JSON does not parse becomes a call with the raw text as its arguments, which the client
  reports as an invalid tool call instead of losing it; call objects the server does not run
  (prose after them) come back as text with their ``<tool_call>`` tags put back, which the
  graph reads as a tool call written as text;
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
from collections.abc import Collection, Iterator
from typing import Any

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_CALLS_START = ('{"name"', "{{", "```", "{\n")
_DECODER = json.JSONDecoder()
_FENCE = re.compile(r"```(?:json)?")
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_FREE_CHOICES = (None, "auto", "required")

TOOL_RESPONSE_STOP = "<tool_response>"
"""Where a reply with tools ends. In Qwen2.5's format a tool's result comes back in the next
(user) message as ``<tool_response>``; the model never writes one in its own turn, yet the 0.5B
model went on after its call with an invented ``<tool_response>`` (measured). Stopping there
keeps the call it wrote and drops the results it made up."""

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


_DOUBLED_EXAMPLE = '{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}'
"""The call format as the 1.5B GGUF's template writes it: in a Jinja string the braces are not
escapes, so the model is shown ``{{"name": ...}}`` and copies the doubled braces."""

QWEN25_CALL_EXAMPLE = '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}'
"""The same line in Qwen2.5's own template (and the 0.5B GGUF's): what the models were trained
on."""


def trained_template(template: str) -> str:
    """``template`` with the call format shown as Qwen2.5 was trained on it (single braces);
    any other template as it is."""
    return template.replace(_DOUBLED_EXAMPLE, QWEN25_CALL_EXAMPLE)


def _template_handler(llama: Any) -> Any:
    """llama-cpp-python's handler for the GGUF's own chat template (public API only), with the
    call format of ``trained_template``."""
    from llama_cpp import llama_chat_format

    cached = getattr(llama, "_turnplan_template_handler", None)
    if cached is not None:
        return cached
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ValueError(
            "This GGUF has no chat template; serve it with chat_format chatml-function-calling."
        )
    template = trained_template(template)
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


def _call_of(value: Any) -> dict[str, Any] | None:
    """``{"name": ..., "arguments": {...}}`` as a call, or None when ``value`` is not one.

    The arguments must be one object. Qwen2.5-Coder 1.5B also wrote them as a list holding
    exactly one object (``"arguments": [{"items": [...]}]``): that list has one reading, so it
    is taken as its object; a longer or empty list, or anything else, is not a call."""
    if not isinstance(value, dict) or set(value) != {"name", "arguments"}:
        return None
    name, arguments = value["name"], value["arguments"]
    if isinstance(arguments, list) and len(arguments) == 1:
        arguments = arguments[0]
    if not (isinstance(name, str) and name.strip() and isinstance(arguments, dict)):
        return None
    return {"name": name.strip(), "arguments": arguments}


def _decode_at(text: str, position: int) -> tuple[Any, int, int] | None:
    """(value, start, end) of the JSON object at ``position`` (``{{...}}``, the doubled braces
    the 1.5B GGUF's template showed, read as ``{...}``), or None."""
    doubled = text.startswith("{{", position)
    start = position + 1 if doubled else position
    try:
        value, end = _DECODER.raw_decode(text, start)
    except ValueError:
        return None
    if doubled:
        if not text.startswith("}", end):
            return None
        end += 1
    return value, position, end


def _bare_calls(text: str) -> list[dict[str, Any]] | None:
    """The reply as a run of ``{"name": ..., "arguments": ...}`` objects, or None.

    ``<tool_call>`` is a special token of Qwen2.5's vocabulary, and llama.cpp leaves special
    tokens out of the text it returns: the tags are gone and only the JSON objects remain,
    one a line, sometimes in a fenced block.
    """
    calls = []
    position = 0
    text = _FENCE.sub("", text).strip()
    while position < len(text):
        decoded = _decode_at(text, position)
        call = None if decoded is None else _call_of(decoded[0])
        if decoded is None or call is None:
            return None
        calls.append(call)
        position = decoded[2]
        while position < len(text) and text[position].isspace():
            position += 1
    return calls or None


def _written_call(value: Any) -> bool:
    """An object shaped as a call, runnable or not: a ``name`` string and ``arguments`` of any
    kind (0.5B wrote ``"arguments": ["all"]``), other keys or not (1.5B put a ``"status"`` in
    front of its call)."""
    return (
        isinstance(value, dict)
        and {"name", "arguments"} <= set(value)
        and isinstance(value["name"], str)
    )


def _mark_written_calls(text: str) -> str:
    """``text`` with every call-shaped object in it wrapped in ``<tool_call>`` tags.

    A reply whose calls are mixed with prose after them (Qwen2.5-Coder 1.5B narrated results it
    had not seen: "I've added it.\\n{call}\\nI've called mom successfully.\\n{call}") is not
    taken as calls: which of its parts the model meant to run is a guess. The tags that llama.cpp
    dropped are put back so that the client sees a tool call written as text, not an answer
    (``agent.turn.empty_answer.is_written_tool_call`` asks the model again once)."""
    pieces = []
    position = 0
    search = 0
    while (found := text.find("{", search)) >= 0:
        decoded = _decode_at(text, found)
        if decoded is None or not _written_call(decoded[0]):
            search = found + 1
            continue
        _, start, end = decoded
        pieces.append(f"{text[position:start]}<tool_call>{text[start:end]}</tool_call>")
        position = search = end
    return "".join(pieces) + text[position:]


def _openai_call(name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _tagged_calls(text: str) -> list[dict[str, Any]]:
    """The ``<tool_call>`` blocks of ``text`` as OpenAI calls; a block whose JSON does not
    parse keeps its raw text as the arguments (the client reports an invalid tool call)."""
    calls = []
    for match in _TOOL_CALL.finditer(text):
        body = match.group(1).strip()
        decoded = _decode_at(body, 0) if body.startswith("{") else None
        call = None if decoded is None or body[decoded[2] :].strip() else _call_of(decoded[0])
        if call is not None:
            arguments = json.dumps(call["arguments"], ensure_ascii=False)
            calls.append(_openai_call(call["name"], arguments))
            continue
        found = _NAME.search(body)
        if found:
            calls.append(_openai_call(found.group(1), body))
    return calls


def _named_arguments(text: str, tool_names: Collection[str]) -> dict[str, Any] | None:
    """The reply ``<tool name>`` on a line of its own and then one arguments object, and nothing
    else (Qwen2.5-Coder 1.5B: ``create_todo\n{"items": [...]}``), as a call; None otherwise.
    Only the name of a tool the request offers counts."""
    name, newline, rest = _FENCE.sub("", text).strip().partition("\n")
    if not newline or name.strip() not in tool_names or not rest.strip().startswith("{"):
        return None
    rest = rest.strip()
    decoded = _decode_at(rest, 0)
    if decoded is None or rest[decoded[2] :].strip() or not isinstance(decoded[0], dict):
        return None
    return {"name": name.strip(), "arguments": decoded[0]}


def parse_tool_calls(
    text: str, tool_names: Collection[str] = ()
) -> tuple[str | None, list[dict[str, Any]]]:
    """(content left outside the calls or None, OpenAI tool calls) of a model's reply.

    Calls are read in the forms the packaged Qwen models were seen to write them, each
    unambiguous: ``<tool_call>`` blocks; or, the tags dropped, a run of call objects (bare,
    braces doubled, or fenced) that ends the reply, after an optional sentence; or the name of
    one of ``tool_names`` (the request's tools) alone on the first line and its arguments object
    as the rest. Call objects with prose after them are not run; they come back as text marked
    as written calls (``_mark_written_calls``)."""
    named = _named_arguments(text, tool_names)
    if named is not None:
        arguments = json.dumps(named["arguments"], ensure_ascii=False)
        return None, [_openai_call(named["name"], arguments)]
    if _TOOL_CALL.search(text):
        calls = _tagged_calls(text)
        if not calls:
            return text, []
        rest = _TOOL_CALL.sub("", text).strip()
        return (rest or None), calls
    # A sentence may come before the calls: they start at the first of these marks.
    marks = [found for found in map(text.find, _CALLS_START) if found >= 0]
    start = min(marks, default=0)
    bare = _bare_calls(text[start:])
    if bare is None:
        return _mark_written_calls(text), []
    calls = [
        _openai_call(call["name"], json.dumps(call["arguments"], ensure_ascii=False))
        for call in bare
    ]
    return (text[:start].strip() or None), calls


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
    stop = kwargs.pop("stop", None) or []
    stop = [stop] if isinstance(stop, str) else list(stop)
    response: dict[str, Any] = handler(
        llama=llama,
        messages=messages,
        tools=tools,
        tool_choice=None,
        stream=False,
        stop=[*stop, TOOL_RESPONSE_STOP],
        **kwargs,
    )
    choice = response["choices"][0]
    names = [tool["function"]["name"] for tool in tools or [] if tool.get("function")]
    content, calls = parse_tool_calls(choice["message"].get("content") or "", names)
    if calls:
        choice["message"] = {"role": "assistant", "content": content, "tool_calls": calls}
        choice["finish_reason"] = "tool_calls"
    else:  # an answer as it is, or calls that were not run, marked as written ones
        choice["message"]["content"] = content
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
