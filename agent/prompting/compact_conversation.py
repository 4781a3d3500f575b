"""The small model's own answer to a question or small talk no tool does.

Why: asked with the planning prompt, the embedded base model echoed the request; with its
own short system prompt and a few example exchanges it answers ("Paris"; measured). And since
it still sometimes says nothing of its own (the question repeated, the examples' words
copied), such a reply is replaced by a plain "no answer, nothing changed".
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda

from agent.prompting.compact_lookup import content_stems
from agent.turn.outcome import not_done_answer
from prompts import Prompts
from prompts import chosen as texts_of


def conversation_prompt(prompt: Any, prompts: Prompts | None = None) -> list[AnyMessage]:
    """The prompt of a question or small talk no tool does: the conversation's own short
    system prompt (``prompts/compact_conversation.md``), a few example exchanges
    (``prompts/compact_conversation_examples.md``) and the user's last message, without the
    planning instructions, which a small model answered by echoing the request. Why the
    examples: the embedded model is a base model, which without them repeated the question
    ("What's the capital of France?") and with them answered it ("Paris"; measured)."""
    messages = prompt.to_messages() if hasattr(prompt, "to_messages") else list(prompt)
    said = [message for message in messages if isinstance(message, HumanMessage)]
    shown: list[AnyMessage] = []
    for question, answer in conversation_examples(prompts):
        shown += [HumanMessage(content=question), AIMessage(content=answer)]
    return [
        SystemMessage(content=texts_of(prompts).load("compact_conversation")),
        *shown,
        *said[-1:],
    ]


def conversation_examples(prompts: Prompts | None = None) -> list[tuple[str, str]]:
    """The example exchanges: blocks of two lines (a message, its answer) apart by a blank
    line."""
    blocks = texts_of(prompts).load("compact_conversation_examples").strip().split("\n\n")
    pairs = [block.strip().split("\n", 1) for block in blocks if block.strip()]
    return [(pair[0].strip(), pair[1].strip()) for pair in pairs if len(pair) == 2]


def _no_answer(reply: str, question: str, prompts: Prompts | None = None) -> bool:
    """Whether the model's ``reply`` says nothing of its own: empty, the question repeated or
    another question, the system prompt or the examples' words copied, or nothing the question
    did not say (what the embedded model did when it had no answer; measured)."""

    def plain(text: str) -> str:
        return " ".join(text.split()).casefold().strip(" ?!.")

    spoken, said = plain(reply), plain(question)
    if not spoken or (said and (said in spoken or spoken in said)) or reply.strip().endswith("?"):
        return True  # nothing, the question repeated, or another question instead of an answer
    if plain(texts_of(prompts).load("compact_conversation"))[:40] in spoken:
        return True
    # Nothing the question did not say ("France is the capital of France"), or words that
    # come from the examples and not from the question ("... at the University of Rome").
    new = content_stems(reply) - content_stems(question)
    examples = " ".join(" ".join(pair) for pair in conversation_examples(prompts))
    return not new or bool(new & content_stems(examples))


def conversation_runnable(free: Any, prompts: Prompts | None = None) -> Any:
    """The model's own answer to a question or small talk, with its short prompt; a reply that
    only repeats the user's words or says nothing is no answer (the embedded 270M model, asked
    "What is 12 times 12?", repeated the question: measured), so the user is told plainly that
    there is no answer and nothing changed."""

    async def answer(prompt: Any) -> AIMessage:
        messages = conversation_prompt(prompt, prompts=prompts)
        # Greedy: sampled, the same question got "Paris" once and "France" the next time.
        reply = await free.ainvoke(messages, temperature=0.0)
        text = reply.text if isinstance(reply, AIMessage) else str(reply)
        if _no_answer(text, messages[-1].text if messages else "", prompts):
            return not_done_answer(texts_of(prompts).load("conversation_unanswered"))
        return reply if isinstance(reply, AIMessage) else AIMessage(content=text)

    return RunnableLambda(answer)
