"""pytest plugin for perfcheck (registered through the ``pytest11`` entry point)."""
