"""The evaluation suite (issue 27 §1): multi-step requests over the built-in tools, run on
turnplan with planning ``auto``, ``always`` and ``off`` and on LangChain's ``TodoListMiddleware``
agent with the same model and tools, each run checked by its end state (the user's tasks in the
database, the conversation's task file), not by the answer's wording. ``python -m bench.eval``;
see bench/README.md."""
