"""Looms: the trees of Nodes, their Branches, edits, files and stream, and the Runner's handler of kind
`node`."""
