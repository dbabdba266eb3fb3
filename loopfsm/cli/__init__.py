"""The command line: ``loopfsm`` and its commands (``main``, ``common`` and a module per group of
commands), the project's ``[tool.loopfsm]`` settings (``project``) and ``loopfsm new`` (``scaffold``)."""
