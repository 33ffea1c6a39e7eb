"""The App's JSON account routes under /account: a session cookie from sign-in authenticates them
(never an API key), and every request that changes something carries the CSRF token."""
