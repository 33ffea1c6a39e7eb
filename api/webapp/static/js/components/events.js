// The `data:` lines of a Server-Sent Events body, read with fetch (the App's streams need the
// session cookie and send a JSON error before the stream starts, which EventSource cannot read).
// The Playground's Runs and the Loom page's Nodes both follow their streams through it.

/** Each `data:` of an SSE body, as it comes; comments (keepalives) are skipped. */
export async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = block.split(/\r?\n/).filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, "")).join("\n");
      if (data) yield data;
    }
  }
}
