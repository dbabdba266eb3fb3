"""What a session id is, in a module that costs nothing to import.

The command line checks an id before it loads the service, the store and the
providers; the service checks the same pattern on every request.
"""

#: A session id: 1-64 letters, digits, '_', '.' or '-' (matched whole).
SESSION_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"
