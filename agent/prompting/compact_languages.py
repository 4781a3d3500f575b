"""The few request shapes the compact profile reads in Spanish, French, German, Portuguese and
Italian, rewritten into the English its rules read.

Why: the compact profile's rules read English verbs, so every request in another language was
answered "no tool of mine does that" (measured: 2 of 5 in the tuning corpus, 0 of 2 held
out). Teaching every rule five languages would multiply what can guess. Instead a whole
request that has one of a few unambiguous shapes is rewritten as the English request it
means, and the English rules (with their doubt rules) do the rest:

- add: a verb that only means "add" ("añade", "ajoute", "füge ... hinzu", "adiciona",
  "aggiungi") and a title; a verb that also means something else ("pon", "mets", "metti":
  put) only with a quoted title or a place ("a mis tareas", "auf meine Liste");
- mark as done: "marca / marque / markiere / segna X" only with "as done" in the same
  language ("como hecho", "als erledigt"); "tacha", "coche", "spunta", "hake X ab" alone;
- delete: "borra", "elimina", "supprime", "lösche", "apaga", "cancella" ... and a title;
- show: "muéstrame", "montre-moi", "zeig mir", "mostra", "mostrami" ... or a question word
  ("qué", "quelles", "was", "quais", "cosa"), only with a word for tasks in the request.

A title is one quoted phrase (or several joined by "and" in that language), or the words
without an article; words that could join two titles ("y", "et", "und", "e", "o", a comma)
are not split by guess: such a request is not read. A pointing word ("eso", "ça", "es",
"isso", "quello") becomes "it", which the English rules resolve or ask about. A request in
these languages that has none of these shapes is not read, and the answer says so plainly
(``looks_foreign``; ``prompts/compact_not_understood.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_QUOTE = r"(?:'[^'\n]+'|\"[^\"\n]+\"|\u2018[^\u2019\n]+\u2019|\u201c[^\u201d\n]+\u201d|«[^»\n]+»)"
_QUOTES = rf"{_QUOTE}(?:\s*(?:,|\by\b|\bet\b|\bund\b|\be\b)\s*{_QUOTE})*"
"""Quoted titles, one or several joined by a comma or "and" in one of the languages."""

_TASK_WORDS = (
    r"(?:tareas?|pendientes?|por hacer|t[aâ]ches?|[àa] faire|aufgaben?|liste|zu tun|"
    r"erledigen|tarefas?|pendentes?|para fazer|attivit[àa]|compiti|da fare|lista|to-?dos?)"
)
_TO_LIST = (
    r"(?:(?:a|en)\s+(?:mis\s+tareas|mi\s+lista(?:\s+de\s+tareas)?|la\s+lista)"
    r"|(?:[àa]|dans|sur)\s+(?:ma\s+liste(?:\s+de\s+t[aâ]ches)?|mes\s+t[aâ]ches|la\s+liste)"
    r"|(?:zu|in|auf|zur)\s+(?:(?:meine[nmr]?|die|der|den)\s+)?(?:aufgaben(?:liste)?|liste|to-?do-?liste)"
    r"|(?:[àa]s?|na|em|para\s+a)\s+(?:minha\s+lista(?:\s+de\s+tarefas)?|minhas\s+tarefas|lista)"
    r"|(?:alla|nella|sulla|alle|nelle)\s+(?:mia\s+lista|lista|mie\s+attivit[àa]|mie\s+cose\s+da\s+fare))"
)
_FROM_LIST = (
    r"(?:de\s+(?:mis\s+tareas|mi\s+lista|la\s+lista|ma\s+liste|mes\s+t[aâ]ches)"
    r"|(?:aus|von)\s+(?:(?:meiner|meinen|der|den)\s+)?(?:liste|aufgaben(?:liste)?)"
    r"|d(?:a|as)\s+(?:minha\s+lista|minhas\s+tarefas|lista)"
    r"|dalla\s+(?:mia\s+)?lista|dalle\s+mie\s+attivit[àa])"
)
_AS_DONE = (
    r"(?:como\s+(?:hech[oa]|completad[oa]|terminad[oa]|feit[oa]|conclu[íi]d[oa])"
    r"|comme\s+(?:faite?|termin[ée]e?|compl[ée]t[ée]e?)"
    r"|als\s+(?:erledigt|fertig|gemacht)"
    r"|come\s+(?:fatt[oa]|completat[oa]|finit[oa]))"
)
_PARTICLE = r"(?:\s+(?:hinzu|dazu|ein|ab))?"


@dataclass(frozen=True)
class _Shape:
    """One way to ask for an action: its verbs, and what must or may follow the title."""

    english: str
    verbs: str
    after: str = ""
    after_required: bool = False
    quoted_is_enough: bool = False
    """With a quoted title the ``after`` words are not needed ("pon 'x'")."""


_SHAPES = (
    _Shape(
        "add {} to my tasks",
        r"añade|añadir|agrega|agregar|ajoute[sz]?|ajouter|rajoute|f[üu]ge?|adiciona|adicione|"
        r"adicionar|acrescenta|acrescente|aggiungi|aggiungere|inserisci",
        _TO_LIST,
    ),
    _Shape(
        "add {} to my tasks",
        r"pon|ponga|apunta|anota|anote|mets|mettez|note[sz]?|setze?|schreibe?|trage?|"
        r"coloca|coloque|p[õo]e|ponha|metti|annota",
        _TO_LIST,
        after_required=True,
        quoted_is_enough=True,
    ),
    _Shape("mark {} as done", r"marca|marque[sz]?|markiere?|segna", _AS_DONE, after_required=True),
    _Shape("mark {} as done", r"tacha|coche[sz]?|spunta|risca|hake?", _AS_DONE),
    _Shape(
        "delete {}",
        r"borra|elimina|elimine|quita|suprime|supprime[sz]?|efface[sz]?|enl[èe]ve[sz]?|"
        r"retire[sz]?|l[öo]sche?|entferne?|apaga|apague|remove|remova|exclui|exclua|"
        r"cancella|rimuovi|togli",
        _FROM_LIST,
    ),
)

_SHOW = re.compile(
    r"^(?:mu[ée]strame|muestra|ens[ée][ñn]ame|dime|montre[sz]?-moi|montre|affiche[sz]?|"
    r"donne-moi|zeig(?:e)?(?:\s+mir)?|nenne\s+mir|mostra(?:-me)?|mostre(?:-me)?|me\s+mostra|"
    r"mostrami|fammi\s+vedere|elenca|dimmi|lista|liste|"
    r"qu[ée]|quelles?|quels?|qu'est-ce|was|welche|o\s+que|quais|quali|cosa|che\s+cosa)\b",
    re.IGNORECASE,
)
_POINTING = re.compile(
    r"^(?:lo|la|eso|esto|esa|ese|[çc]a|cela|le|es|das|dies|isso|isto|o|a|quello|questo|quella)$",
    re.IGNORECASE,
)
_ARTICLE = re.compile(
    r"^(?:el|la|los|las|le|les|l'|un|una|une|der|die|das|den|dem|ein|eine|einen|"
    r"o|os|as|um|uma|il|lo|gli|i|mi|mis|ma|mes|mon|meine[nm]?|minha|meu|mia|mio)\s+",
    re.IGNORECASE,
)
_JOINS = re.compile(r",|\b(?:y|e|et|und|oder|o|ou|ni|sowie)\b", re.IGNORECASE)
_PLEASE = r"(?:por\s+favor|s'il\s+(?:te|vous)\s+pla[îi]t|bitte|per\s+favore)"
_COURTESY = re.compile(rf"^{_PLEASE}[\s,]+|[\s,]+{_PLEASE}$", re.IGNORECASE)
_ENGLISH_TOO = frozenset({"remove", "note", "notes", "was", "a", "e", "o"})
"""First words that are English as well: a request starting with them is read as another
language's only when it looks like one (``looks_foreign``)."""


def _title(words: str) -> str | None:
    """The title an action takes from ``words``: quoted titles as they are (joined by "and"),
    a pointing word as "it", else the words without a leading article; None when unquoted
    words could be two titles."""
    words = words.strip()
    if re.fullmatch(_QUOTES, words):
        words = re.sub("«([^»]+)»", r'"\1"', words)  # quotes the English rules read
        return re.sub(r"\s*(?:\by\b|\bet\b|\bund\b|\be\b)\s*(?=['\"\u2018\u201c])", " and ", words)
    if _POINTING.match(words):
        return "it"
    if re.search(r"['\"\u2018\u2019\u201c\u201d«»]", words) or _JOINS.search(words):
        return None
    title = _ARTICLE.sub("", words).strip()
    return title or None


def _read(shape: _Shape, text: str) -> str | None:
    verbs = rf"^(?:{shape.verbs})\s+(?P<title>.+?)"
    after = rf"(?:\s+(?P<after>{shape.after}))" if shape.after else ""
    match = re.match(
        rf"{verbs}{after}{'' if shape.after_required else '?'}{_PARTICLE}$", text, re.I
    )
    if match is None and shape.after_required and shape.quoted_is_enough:
        match = re.match(rf"^(?:{shape.verbs})\s+(?P<title>{_QUOTES}){_PARTICLE}$", text, re.I)
    if match is None:
        return None
    title = _title(match["title"])
    return shape.english.format(title) if title else None


def in_english(request: str) -> str:
    """``request`` as the English request it means when it has one of the shapes this module
    reads (the module docstring), else unchanged."""
    text = " ".join(request.split()).strip(" .!¡¿")
    text = _COURTESY.sub("", text).strip(" ,.!¡¿")
    if not text or not (looks_foreign(text) or _foreign_start(text)):
        return request
    if text.endswith("?") or _SHOW.match(text):
        shown = _SHOW.match(text) and re.search(rf"\b{_TASK_WORDS}", text, re.IGNORECASE)
        return "show me my tasks" if shown else request
    for shape in _SHAPES:
        english = _read(shape, text)
        if english is not None:
            return english
    return request


def _foreign_start(text: str) -> bool:
    """Whether ``text`` starts with a verb of the shapes above that is not English too."""
    first = text.split()[0].casefold()
    if first in _ENGLISH_TOO:
        return False
    verbs = "|".join(shape.verbs for shape in _SHAPES)
    return bool(_SHOW.match(text) or re.match(rf"(?:{verbs})\b", text, re.IGNORECASE))


_FOREIGN_WORDS = frozenset(
    {
        "el",
        "los",
        "las",
        "mis",
        "tengo",
        "qué",
        "por",
        "para",
        "les",
        "mes",
        "une",
        "des",
        "du",
        "et",
        "est",
        "je",
        "der",
        "das",
        "und",
        "ist",
        "ich",
        "meine",
        "mir",
        "nicht",
        "bitte",
        "minha",
        "minhas",
        "não",
        "gli",
        "della",
        "mia",
        "mie",
        "sono",
        "che",
        "di",
        "per",
        "favore",
        "tareas",
        "tâches",
        "aufgaben",
        "tarefas",
        "attività",
        "liste",
        "lista",
    }
)


def looks_foreign(request: str) -> bool:
    """Whether ``request`` looks written in another language than English (a letter English
    does not use, or two common words of the languages above): what no rule read is then said
    to be not understood, not to be something no tool does."""
    letters = [char for char in request if char.isalpha()]
    if any(not char.isascii() for char in letters):
        return True
    words = re.findall(r"[a-zà-ÿ]+", request.casefold())
    return sum(word in _FOREIGN_WORDS for word in words) >= 2
