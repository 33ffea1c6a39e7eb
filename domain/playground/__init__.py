"""The App's Playground: Runs, one streamed Completion each, that the Runner runs and keeps
(spec: "Use the Playground")."""
