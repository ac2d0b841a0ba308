"""Loading and training of the models an audit needs."""
