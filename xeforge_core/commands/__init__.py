"""Subcommands of the ``xeforge`` CLI (see ``xeforge_core.cli``)."""
