// Intentionally empty: the helpers are inline in the header.
