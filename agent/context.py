"""Run-time settings of the supervisor: the graph's ``context_schema``.

Callers pass these per run (``graph.ainvoke(..., context={...})``, or ``context`` in the
LangGraph SDK); Studio shows them as the assistant's context form. Every field has a default so a
run needs none. Environment variables are read elsewhere, with type conversion, not here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, Self

BUILTIN_TOOLSETS = ("personal_tasks", "conversation_tasks")
"""Names of the built-in domain toolsets a run may bind (``Context.toolsets``)."""
ToolsetName = Literal["personal_tasks", "conversation_tasks"]
DEFAULT_TOOLSETS: tuple[ToolsetName, ...] = ("personal_tasks",)


class UnknownContextKeyError(TypeError):
    """A run's context named a setting that does not exist (a typo, or a setting of another
    graph). A ``TypeError``, as an unexpected keyword argument is; the message names the key."""


LIMIT_CEILINGS: dict[str, int] = {
    "max_title_length": 1_000,
    "max_text_length": 10_000,
    "max_batch_items": 200,
    "max_plan_rows": 200,
    "max_plan_edits": 200,
    "max_message_chars": 200_000,
    "base_iterations": 1_000,
    "max_iterations": 1_000,
    "history_limit": 200,
    "max_parallel_tools": 32,
    "max_idle_rounds": 100,
    "max_reminders": 20,
    "max_retries": 10,
    "request_timeout": 600,
}
"""The highest value a run's context may give each limit of the work a run may cause (rows,
edits, message size, LLM calls, messages per call, tools at once, retries, seconds per model
request). Any client of the server sends its own context, so a limit it could raise at will
would protect nothing: the settings may lower these, never pass them (the largest allowed plan
work is measured against them: ``tests/integration/server/test_input_limits_served.py``)."""


@dataclass(kw_only=True)
class Context:
    """Settings for one run of the supervisor graph.

    Each field's help text is its ``description`` metadata: pydantic puts it in the JSON schema
    that ``get_schemas`` returns and Studio shows beside the form field (attribute docstrings
    never reach that schema). Unknown keys are refused here, for Python callers, and by
    ``agent.server`` before the LangGraph server would drop them silently.
    """

    model: str | None = field(
        default=None,
        metadata={
            "description": 'Chat model: "openai:<model>" (OpenAI, or any OpenAI-compatible '
            'server at OPENAI_BASE_URL), "local" (the embedded model), or "<provider>:<model>" '
            "for any provider of LangChain's init_chat_model (anthropic:, google_genai:, "
            "ollama:, ...; its package installed). Empty: TURNPLAN_MODEL, else "
            "openai:gpt-4o-mini when OPENAI_API_KEY is set, else local."
        },
    )
    planning: Literal["auto", "always", "off"] = field(
        default="auto",
        metadata={
            "description": "auto: the model plans multi-step requests and answers simple ones "
            "directly. always: the first call of every turn must call create_todo (for models "
            "too weak to decide, and for products that want every turn on record as a plan). "
            "off: no plan tools are bound and the prompt asks for no plan; the model works "
            "with the domain tools alone (to measure what planning adds)."
        },
    )
    approve_plan: bool = field(
        default=False,
        metadata={
            "description": "Pause for the user's approval of each new plan before any item is "
            "worked (an interrupt of type plan_approval; resume with approve, edit or reject)."
        },
    )
    user_id: str = field(
        default="local-user",
        metadata={
            "description": "The user the personal-task tools act for. Never a tool argument."
        },
    )
    conversation_id: str | None = field(
        default=None,
        metadata={"description": "Explicit conversation id; empty: the LangGraph thread id."},
    )
    base_iterations: int = field(
        default=10,
        metadata={
            "description": "LLM calls a turn may make before its budget is first extended "
            "(seed 004's base)."
        },
    )
    max_iterations: int = field(
        default=50,
        metadata={
            "description": "Absolute cap on LLM calls in one turn, however many todos remain."
        },
    )
    max_reminders: int = field(
        default=2,
        metadata={
            "description": "Times in a row the model may answer while plan items are open "
            "(each time it is reminded and sent back) before the turn ends with an honest "
            "partial answer."
        },
    )
    max_idle_rounds: int = field(
        default=3,
        metadata={
            "description": "Tool rounds in a row that start or close no plan item and only "
            "read the plan (list_todo) or repeat a call already made this turn with the same "
            "arguments, before the turn ends stalled with an honest partial answer."
        },
    )
    max_turn_tokens: int | None = field(
        default=None,
        metadata={
            "description": "Token budget of one turn: once its LLM calls' prompt plus "
            "completion tokens pass it, the turn ends budget_exhausted with an honest partial "
            "answer. Empty: no token budget (the call budget still applies)."
        },
    )
    history_limit: int = field(
        default=10,
        metadata={
            "description": "Most recent messages sent with each LLM call (plus the system "
            "prompt and the plan view)."
        },
    )
    max_title_length: int = field(
        default=200,
        metadata={"description": "Longest todo title, in characters, after trimming."},
    )
    max_text_length: int = field(
        default=2000,
        metadata={"description": "Longest todo context or completionCriteria, in characters."},
    )
    max_batch_items: int = field(
        default=50,
        metadata={"description": "Most items one create_todo call may create."},
    )
    max_plan_rows: int = field(
        default=100,
        metadata={
            "description": "Most rows one turn's plan may hold, closed ones included: "
            "create_todo, planEdits adds and a continued plan are refused "
            "(VALIDATION_ERROR, nothing written) past it. Every row is shown with every LLM "
            "call of the turn, so this bounds its prompt. At most "
            f"{LIMIT_CEILINGS['max_plan_rows']}."
        },
    )
    max_plan_edits: int = field(
        default=50,
        metadata={
            "description": "Most planEdits operations one run may send (more: VALIDATION_ERROR, "
            f"nothing changed). At most {LIMIT_CEILINGS['max_plan_edits']}."
        },
    )
    max_message_chars: int = field(
        default=32_000,
        metadata={
            "description": "Most characters the new messages of one run may hold together "
            "(content blocks counted as their JSON). More is refused with inputError "
            "(VALIDATION_ERROR) and the messages are removed from the thread: no turn starts. At "
            f"most {LIMIT_CEILINGS['max_message_chars']}."
        },
    )
    max_parallel_tools: int = field(
        default=8,
        metadata={
            "description": "Tool calls of one model message that run at once (todo tools and "
            "ask_user always run one at a time, in the order written)."
        },
    )
    request_timeout: float = field(
        default=60.0,
        metadata={"description": "Seconds before one model request is abandoned (then retried)."},
    )
    max_retries: int = field(
        default=2,
        metadata={
            "description": "Retries of a model request after a 429, a 5xx, a connection "
            "error or a timeout, with backoff."
        },
    )

    toolsets: list[ToolsetName] = field(
        default_factory=lambda: list(DEFAULT_TOOLSETS),
        metadata={
            "description": "Built-in domain toolsets bound for this run, each with its prompt "
            "section: personal_tasks (the user's own task list, kept in the database) and "
            "conversation_tasks (a task list of this conversation, kept in a JSON file). The "
            "todo plan tools are always bound; [] binds no built-in toolset.",
            # A default_factory leaves no default in the JSON schema; Studio's form shows this.
            "json_schema_extra": {"default": list(DEFAULT_TOOLSETS)},
        },
    )
    prompt_profile: Literal["auto", "full", "compact"] = field(
        default="auto",
        metadata={
            "description": "What each LLM call sends. full: the whole system prompt and every "
            "tool. compact: for small models, a short prompt, only the tools the step needs with "
            "shortened schemas, and forced tool calls. auto: compact for the local model."
        },
    )

    verifier_model: str | None = field(
        default=None,
        metadata={
            "description": "A model (any string `model` accepts) that judges, without tools, "
            "each row with completion criteria against its criteria and evidence before it "
            "closes; a refusal leaves the row open (COMPLETION_REFUSED). Its calls and tokens "
            "are counted apart (verifierCalls, verifierTokens). Empty: off."
        },
    )
    audit_model: str | None = field(
        default=None,
        metadata={
            "description": "A model (any string `model` accepts) that audits the answer of a "
            "turn with a plan before it ends answered: without tools, it sees the request, the "
            "rows with their outcomes and evidence and the draft answer, and lists the parts "
            "not done or claimed without evidence. The supervisor is sent back once with them; "
            "parts still missing end the turn incomplete, its answer naming them. A failed or "
            "unreadable audit ends it failed. Its calls and tokens are counted apart "
            "(auditCalls, auditTokens). Empty: off."
        },
    )

    handle_tool_errors: bool = field(
        default=True,
        metadata={
            "description": "What happens when a tool raises an exception (a bug, or a "
            "caller's tool that failed): true (the default) sends it back to the model as the "
            "call's error result (a tool message with status error, code TOOL_ERROR; in the "
            "supervisor also recorded as the row's evidence and in the call ledger, so a "
            "resumed run does not run it again), and the model may retry or cancel the item "
            "saying why; a worker's model gets it the same way. false re-raises it, ending the "
            "run with the exception, as LangGraph's ToolNode does with "
            "handle_tool_errors=False. Interrupts always pass through."
        },
    )

    _given: ClassVar[frozenset[str]] = frozenset()
    """The settings the caller named (an instance keeps its own): they override the defaults
    ``build_graph(context=...)`` gives, field by field (``run_settings``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        """Refuse unknown keys before ``__init__`` does, with the same error the server gives,
        and note which settings the caller named.

        LangGraph builds the context as ``Context(**context)`` from the dict a caller passes,
        so this is the one place a Python run's unknown keys can be named and explained.
        """
        check_context_keys(kwargs)
        instance = super().__new__(cls)
        object.__setattr__(instance, "_given", frozenset(kwargs))
        return instance

    def given(self) -> dict[str, Any]:
        """The settings the caller named, with their values (the others are defaults)."""
        return {name: getattr(self, name) for name in self._given}

    def __post_init__(self) -> None:
        """Settings often arrive as JSON from a client or Studio's form: accept numbers sent as
        strings, and refuse values that would make a turn misbehave, naming the field."""
        for name in _POSITIVE_INTS:
            value = _as_number(name, getattr(self, name), int)
            if value < 1:
                raise ValueError(f"Context.{name} must be at least 1, got {value}.")
            ceiling = LIMIT_CEILINGS.get(name)
            if ceiling is not None and value > ceiling:
                raise ValueError(f"Context.{name} must be at most {ceiling}, got {value}.")
            setattr(self, name, value)
        if self.max_reminders < 0 or self.max_retries < 0:
            raise ValueError("Context.max_reminders and max_retries must not be negative.")
        for name in ("max_reminders", "max_retries"):
            if getattr(self, name) > LIMIT_CEILINGS[name]:
                raise ValueError(
                    f"Context.{name} must be at most {LIMIT_CEILINGS[name]}, "
                    f"got {getattr(self, name)}."
                )
        if self.max_turn_tokens is not None:
            self.max_turn_tokens = _as_number("max_turn_tokens", self.max_turn_tokens, int)
            if self.max_turn_tokens < 1:
                raise ValueError(
                    f"Context.max_turn_tokens must be at least 1 (or empty), got "
                    f"{self.max_turn_tokens}."
                )
        self.request_timeout = _as_number("request_timeout", self.request_timeout, float)
        if not 0 < self.request_timeout <= LIMIT_CEILINGS["request_timeout"]:
            raise ValueError(
                "Context.request_timeout must be a positive number of seconds, at most "
                f"{LIMIT_CEILINGS['request_timeout']}."
            )
        if self.base_iterations > self.max_iterations:
            raise ValueError(
                f"Context.base_iterations ({self.base_iterations}) must not exceed "
                f"max_iterations ({self.max_iterations})."
            )
        if self.prompt_profile not in ("auto", "full", "compact"):
            raise ValueError(
                "Context.prompt_profile must be 'auto', 'full' or 'compact', "
                f"got {self.prompt_profile!r}."
            )
        self.toolsets = _toolset_names(self.toolsets)
        if self.planning not in ("auto", "always", "off"):
            raise ValueError(
                f"Context.planning must be 'auto', 'always' or 'off', got {self.planning!r}."
            )


_POSITIVE_INTS = (
    "base_iterations",
    "max_iterations",
    "history_limit",
    "max_title_length",
    "max_text_length",
    "max_batch_items",
    "max_plan_rows",
    "max_plan_edits",
    "max_message_chars",
    "max_parallel_tools",
    "max_idle_rounds",
)


def _toolset_names(value: object) -> list[ToolsetName]:
    """The run's toolsets as a list of known names, duplicates dropped; anything else is
    refused with the valid names, so a typo never silently binds nothing."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(
            f"Context.toolsets must be a list of toolset names, got {value!r}. "
            f"Valid names: {', '.join(BUILTIN_TOOLSETS)}."
        )
    names: list[ToolsetName] = []
    for name in value:
        if name not in BUILTIN_TOOLSETS:
            raise ValueError(
                f"Unknown toolset {name!r} in Context.toolsets. "
                f"Valid names: {', '.join(BUILTIN_TOOLSETS)}."
            )
        if name not in names:
            names.append(name)
    return names


def _as_number(name: str, value: object, kind: type[int] | type[float]) -> Any:
    """``value`` as ``kind``; whole-number strings and floats are accepted for ints."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"Context.{name} must be a number, got {value!r}.")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"Context.{name} must be a number, got {value!r}.") from None
    if kind is int:
        if not number.is_integer():
            raise ValueError(f"Context.{name} must be a whole number, got {value!r}.")
        return int(number)
    return number


CONTEXT_KEYS = frozenset(f.name for f in fields(Context))
"""The settings a run's context may hold."""


def check_context_keys(keys: Iterable[str]) -> None:
    """Raise ``UnknownContextKeyError`` naming every key that is not a ``Context`` setting.

    The one rule for unknown keys, used by ``Context`` itself (Python callers) and by the
    LangGraph server's graph factory (``agent.server``), which sees the context before the
    server filters it.
    """
    unknown = sorted(set(keys) - CONTEXT_KEYS)
    if unknown:
        named = ", ".join(repr(key) for key in unknown)
        noun = "key" if len(unknown) == 1 else "keys"
        raise UnknownContextKeyError(
            f"Unknown context {noun} {named}. The context settings are: "
            f"{', '.join(sorted(CONTEXT_KEYS))}."
        )


ContextDefaults = Context | Callable[[Any], Context]
"""The defaults of a graph's runs (``build_graph(context=...)``): settings, or a function that
makes them from the run's own context (a parent graph's, of any type, or None)."""


def run_settings(run_context: object, defaults: ContextDefaults | None = None) -> Context:
    """turnplan's settings for a run whose context is ``run_context``: the one rule every
    reader of a run's context follows (nodes, tools, workers).

    A run of turnplan's own graph has a ``Context``. Inside a user's graph (turnplan's compiled
    graph as a node of a ``StateGraph``), LangGraph hands the subgraph the parent's context:
    an object of the user's schema, a plain dict when the parent has no schema, or None. So:
    the defaults (``defaults``, called with the run's context when it is a function, else the
    built-in ones), overridden by the settings the run names itself: a ``Context``'s named
    fields, or turnplan's keys in a mapping (the mapping's other keys are the parent's own).
    """
    if defaults is None:
        if isinstance(run_context, Context):
            return run_context
        base = Context()
    elif isinstance(defaults, Context):
        base = defaults
    else:
        base = defaults(run_context)
        if not isinstance(base, Context):
            raise TypeError(
                "build_graph(context=...) must return an agent.context.Context, "
                f"got {type(base).__name__}."
            )
    if isinstance(run_context, Context):
        own = run_context.given()
    elif isinstance(run_context, Mapping):
        own = {key: value for key, value in run_context.items() if key in CONTEXT_KEYS}
    else:
        own = {}
    return replace(base, **own) if own else base
