"""kraftkit's command-line tools: one module per command group, each thin over the library."""
