"""Ways to run signal computation besides in process (the default, `signals.store.InProcess`): a Ray cluster."""
