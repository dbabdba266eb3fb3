"""The script drivers: ``loopfsm run MACHINE --script FILE`` for the brain, the agent loop and the router run.

Each drives one shipped machine from a YAML file and prints a trace; they sit
above the machines and the router's store, and below the command line.
"""
