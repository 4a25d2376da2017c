"""Where cluster state comes from: snapshot files, or the live API server."""
