"""The machines that ship with loopfsm, each compiled from its YAML file in ``machines/``."""
