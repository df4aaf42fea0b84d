"""The ``plena-opt`` command line: one module per subcommand, each with ``register(subparsers)``."""
