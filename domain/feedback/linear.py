"""The one small client of Linear's GraphQL API that feedback needs: upload a screenshot (`fileUpload`,
then a PUT of its bytes to the signed address that Linear answers), and make an issue (`issueCreate`).

    client = LinearClient(api_key, team_id)                       # ACS_LINEAR_API_KEY, ACS_LINEAR_TEAM_ID
    asset = await client.upload("1.png", "image/png", data)      # an address that Linear's issue can show
    url = await client.create_issue("Bug: ...", "markdown ...")  # the issue's address

Linear takes a personal API key as the bare Authorization header (no "Bearer"). Any failure (no answer,
an HTTP error, GraphQL `errors`, `success: false`) is a `LinearFailed` with a short reason: the caller
has stored the note first and records the reason instead of an issue.
"""
from __future__ import annotations

from typing import Any

import httpx

API_URL = "https://api.linear.app/graphql"

ISSUE_CREATE = """mutation IssueCreate($input: IssueCreateInput!) {
  issueCreate(input: $input) { success issue { id identifier url } }
}"""
FILE_UPLOAD = """mutation FileUpload($contentType: String!, $filename: String!, $size: Int!) {
  fileUpload(contentType: $contentType, filename: $filename, size: $size) {
    success uploadFile { uploadUrl assetUrl headers { key value } }
  }
}"""


class LinearFailed(Exception):
    """Linear made nothing: its reason, short enough to show in Admin's Linear column."""


class LinearClient:
    def __init__(self, api_key: str, team_id: str, *, api_url: str = API_URL, timeout_s: float = 20.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.team_id = team_id
        self.api_url = api_url
        self._headers = {"Authorization": api_key, "Content-Type": "application/json"}
        self._timeout = timeout_s
        self._transport = transport

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self._timeout, transport=self._transport)

    async def _call(self, http: httpx.AsyncClient, query: str, variables: dict[str, Any], field: str) -> dict[str, Any]:
        """The mutation's result object (`data.<field>`), or LinearFailed."""
        try:
            answer = await http.post(self.api_url, json={"query": query, "variables": variables}, headers=self._headers)
        except httpx.HTTPError as error:
            raise LinearFailed(f"Linear did not answer: {type(error).__name__}.") from error
        try:
            body = answer.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise LinearFailed(f"Linear answered {answer.status_code} without JSON.")
        if body.get("errors"):
            first = body["errors"][0] if isinstance(body["errors"], list) else body["errors"]
            message = first.get("message") if isinstance(first, dict) else str(first)
            raise LinearFailed(f"Linear refused {field} ({answer.status_code}): {message}")
        if answer.status_code >= 400:
            raise LinearFailed(f"Linear answered {answer.status_code}.")
        result = (body.get("data") or {}).get(field)
        if not isinstance(result, dict) or not result.get("success"):
            raise LinearFailed(f"Linear's {field} did not succeed.")
        return result

    async def upload(self, filename: str, content_type: str, data: bytes) -> str:
        """The asset address of a file uploaded to Linear's storage, for an issue's description."""
        async with self._client() as http:
            result = await self._call(http, FILE_UPLOAD, {"contentType": content_type, "filename": filename,
                                                          "size": len(data)}, "fileUpload")
            upload = result.get("uploadFile") or {}
            target, asset = upload.get("uploadUrl"), upload.get("assetUrl")
            if not target or not asset:
                raise LinearFailed("Linear's fileUpload gave no address to upload to.")
            headers = {"Content-Type": content_type, "Cache-Control": "public, max-age=31536000"}
            headers.update({item["key"]: item["value"] for item in upload.get("headers") or []
                            if isinstance(item, dict) and "key" in item and "value" in item})
            try:
                stored = await http.put(target, content=data, headers=headers)
            except httpx.HTTPError as error:
                raise LinearFailed(f"Linear's storage did not answer: {type(error).__name__}.") from error
            if stored.status_code >= 400:
                raise LinearFailed(f"Linear's storage answered {stored.status_code} to a screenshot.")
            return str(asset)

    async def create_issue(self, title: str, description: str) -> str:
        """The new issue's address in Linear."""
        async with self._client() as http:
            result = await self._call(http, ISSUE_CREATE, {"input": {"teamId": self.team_id, "title": title,
                                                                     "description": description}}, "issueCreate")
        url = (result.get("issue") or {}).get("url")
        if not url:
            raise LinearFailed("Linear made the issue but gave no address for it.")
        return str(url)
