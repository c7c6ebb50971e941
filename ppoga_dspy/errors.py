"""The project's own exception root, so a caller can catch everything ppoga-dspy raises on purpose."""


class PPoGAError(Exception):
    """Base of the errors ppoga-dspy raises for bad configuration or input; the message says what to do."""


class ConfigError(PPoGAError, ValueError):
    """A setting, spec or option is invalid; the message names it and the accepted forms."""
