"""A tool's injected arguments (``ToolRuntime``, ``InjectedState``, ``InjectedStore``, ...) as
langchain-core can validate and dump them without a warning, whatever the tool's annotation.

langchain-core validates every call's arguments against the tool's ``args_schema``, the injected
ones included, then ``model_dump``s the result only to learn its keys. A user's tool written as
LangChain documents it, ``runtime: ToolRuntime``, declares ``ToolRuntime[None, dict]`` (the type
parameters' defaults): turnplan's ``Context`` and dataclass state do not match, so pydantic warns
(``PydanticSerializationUnexpectedValue``, twice per call) and, with warnings as errors, the call
fails. The dump also walks the whole graph state, every message of the thread, on every call.

So the tools nodes (``agent.calls.ordering.OrderedToolNode``) run a copy of each such tool whose
schema says what turnplan's own tools say (``agent.tools.runtime.ToolRuntimeT``): the runtime is
``ToolRuntime[Any, Any]``, and every injected argument dumps as ``None``. The model sees the same
tool (injected arguments are never in its schema), the function gets the same values, and the
caller's tool object is left as it was.
"""

from __future__ import annotations

from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from langchain_core.tools import BaseTool, InjectedToolArg
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, PlainSerializer, create_model

_DUMPS_AS_NONE = PlainSerializer(lambda _: None)


def _is_runtime(annotation: Any) -> bool:
    """Whether ``annotation`` is a ``ToolRuntime``, bare, parametrized or in an ``Optional``."""
    if annotation is ToolRuntime or get_origin(annotation) is ToolRuntime:
        return True
    if get_origin(annotation) is Union:
        return any(_is_runtime(arg) for arg in get_args(annotation))
    return False


def _is_marker(item: Any) -> bool:
    """An ``InjectedToolArg`` marker (``InjectedState``, ``InjectedStore``, ...), as an instance
    or, as LangGraph's examples write ``InjectedState``, as the class itself."""
    return isinstance(item, InjectedToolArg) or (
        isinstance(item, type) and issubclass(item, InjectedToolArg)
    )


def _quiet_annotation(annotation: Any) -> Any | None:
    """The annotation an injected argument gets instead of ``annotation``, or None when it is
    not injected or already dumps quietly."""
    base: Any = annotation
    extras: tuple[Any, ...] = ()
    if get_origin(annotation) is Annotated:
        base, *rest = get_args(annotation)
        extras = tuple(rest)
    if any(isinstance(item, PlainSerializer) for item in extras):
        return None
    if _is_runtime(base):
        return Annotated[ToolRuntime[Any, Any], InjectedToolArg(), *extras, _DUMPS_AS_NONE]
    if any(_is_marker(item) for item in extras):
        return Annotated[base, *extras, _DUMPS_AS_NONE]
    return None


def quiet_injected_args(tool: BaseTool) -> BaseTool:
    """``tool``, or a copy whose ``args_schema`` validates its injected arguments as turnplan's
    runtime does and dumps them as ``None`` (see the module docstring)."""
    schema = tool.args_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return tool
    try:
        hints = get_type_hints(schema, include_extras=True)
    except (NameError, TypeError):  # annotations it cannot resolve: left to langchain-core
        return tool
    overrides: dict[str, Any] = {}
    for name, info in schema.model_fields.items():
        quiet = _quiet_annotation(hints.get(name, info.annotation))
        if quiet is not None:
            overrides[name] = (quiet, ... if info.is_required() else info.default)
    if not overrides:
        return tool
    quiet_schema = create_model(
        schema.__name__, __base__=schema, __module__=schema.__module__, **overrides
    )
    return tool.model_copy(update={"args_schema": quiet_schema})
