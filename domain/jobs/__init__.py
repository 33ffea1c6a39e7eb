"""Jobs: one Completion request run in the background, and the Runner's handler of kind `job`."""
