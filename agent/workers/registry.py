"""The workers a supervisor can delegate to, by ``agentType``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from agent.workers.worker import Worker


class WorkerRegistry(Mapping[str, Worker]):
    """Workers by name; built once per graph from a list, so a duplicate is a setup error
    (two workers for one ``agentType`` would make delegation ambiguous)."""

    def __init__(self, workers: Iterable[Worker] = ()) -> None:
        self._workers: dict[str, Worker] = {}
        for worker in workers:
            if worker.name in self._workers:
                raise ValueError(
                    f"Two workers are registered as {worker.name!r}; names must be unique."
                )
            self._workers[worker.name] = worker

    def __getitem__(self, name: str) -> Worker:
        return self._workers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._workers)

    def __len__(self) -> int:
        return len(self._workers)

    def descriptions(self) -> dict[str, str]:
        """``{agentType: description}`` for the supervisor's prompt."""
        return {name: worker.description for name, worker in self._workers.items()}

    def names_text(self) -> str:
        """The registered types as the model should write them, for error messages."""
        return ", ".join(f"'{name}'" for name in self._workers) or "(none)"
