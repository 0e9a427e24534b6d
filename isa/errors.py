"""Exceptions raised by the ISA layer."""


class ConfigError(ValueError):
    """A hardware configuration that cannot work; the message names the field and its allowed range."""


class EncodingError(ValueError):
    """A value does not fit its instruction field, or a word does not decode."""


class AsmError(ValueError):
    """A line of assembly text cannot be parsed; the message gives the line number."""
