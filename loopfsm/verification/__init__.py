"""Verification: ``verify`` explores a machine and proves its invariants (``verify``, ``verify_inputs``,
``verify_report``), ``paths`` writes tests that take every row, ``tracefile`` reads and writes the trace
files ``replay`` runs, and ``coverage`` counts the rows a test run took."""
