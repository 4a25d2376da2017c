"""Records, quantity parsing and the cluster snapshot: the data the engine works on."""
