"""The platform's logic below HTTP: plan, admit, hold, run and settle a Completion; the kinds of
background work (Jobs, Loom Nodes, harvests); access, usage and the admin's operations. It opens every
transaction and knows nothing of HTTP: `api/` reads requests and renders what this layer returns."""
