"""What a signed-in User does in the App: sign in, apply, keys, usage, token requests.

Each use case opens its own transaction and returns plain data (a JSON-able document, or the values
that the api puts in cookies); `api/account/` reads HTTP and renders.
"""
