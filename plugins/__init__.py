"""Built-in and example scheduler plugins, loaded through the ``scaler.plugins`` entry points."""
