"""The App: its pages and static files (a Preact + htm front end without a bundler)."""
