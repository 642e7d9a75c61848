"""ktk: the command line. Thin: it parses arguments and calls the packages."""

__version__ = "0.1.0"
