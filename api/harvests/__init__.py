"""Harvests: the routes of POST/GET/DELETE /v1/harvest and the download route of their files."""
