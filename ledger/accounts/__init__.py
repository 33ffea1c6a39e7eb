"""Accounts and access: Users, API keys, passwords, the App's sessions, links, tries, Applications,
sign-in and mail."""
