"""Storage: the embedded server, connections and migrations."""
