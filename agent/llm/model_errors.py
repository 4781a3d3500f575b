"""Errors raised while turning a model setting into a working chat model.

Kept apart from ``agent.llm.chat_models`` so ``agent.llm.local_model`` can raise them without an
import cycle.
"""

from langchain_core.exceptions import ModelAPIError

from agent.errors import ConfigurationError


class ModelConfigurationError(ConfigurationError):
    """The model setting cannot work as configured; the message names the fix.

    Raised before any request is sent (unknown provider, no API key, the ``local`` extra missing)
    or when the embedded server cannot start, so a user sees one actionable line, not a traceback
    from deep inside an HTTP client.
    """


class MissingModelPackageError(ModelConfigurationError):
    """The setting names a provider whose LangChain integration package is not installed.

    ``package`` is what to install (``langchain-google-genai`` for ``google_genai:...``) and
    ``install_command`` the command, so a caller can show or run the fix, not parse a message.
    """

    def __init__(self, setting: str, package: str) -> None:
        self.setting = setting
        self.package = package
        self.install_command = f"pip install {package}"
        super().__init__(
            f"The model setting {setting!r} needs the package {package}, which is not "
            f"installed: {self.install_command}"
        )


class EmptyModelResponseError(ModelAPIError):
    """The model server answered 200 with no choice at all (some compatible servers do on errors).

    A ``langchain_core`` ``ModelAPIError`` (a server failure, retryable), so the graph can treat
    it like a 5xx that survived the client's retries.

    ``ChatOpenAI`` alone fails here with an ``IndexError`` (or "No generations found in stream"),
    which reads like a bug in our code; this says what the server did.
    """
